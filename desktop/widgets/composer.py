"""Where the user writes: multi-line, Enter sends, Shift+Enter starts a new line.

While a turn runs the Send button becomes Stop; a read-only conversation
disables the composer and says why. "Send to several…" hands the text to
whoever set :attr:`Composer.on_several` (the window asks which models).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QHBoxLayout, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from branchwise.core.i18n.language import _


class MessageEdit(QPlainTextEdit):
    """A plain-text editor where Enter submits and Shift+Enter inserts a newline.

    Args:
        on_submit: called when Enter is pressed.
    """

    def __init__(self, on_submit: Callable[[], None], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._on_submit = on_submit
        self.setObjectName("messageEdit")
        self.setTabChangesFocus(True)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        """Enter (without Shift) submits; everything else edits."""
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            modifiers = event.modifiers()
            if not modifiers & Qt.KeyboardModifier.ShiftModifier:
                self._on_submit()
                event.accept()
                return
            self.insertPlainText("\n")
            event.accept()
            return
        super().keyPressEvent(event)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        """About four lines tall."""
        line = self.fontMetrics().lineSpacing()
        return QSize(super().sizeHint().width(), line * 4 + 16)


class Composer(QWidget):
    """The message editor with Send / Stop.

    Args:
        on_send: called with the text to send (the editor is cleared).
        on_stop: called when Stop is clicked.
    """

    def __init__(
        self,
        on_send: Callable[[str], object],
        on_stop: Callable[[], object],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        self._on_send = on_send
        self._on_stop = on_stop
        self._running = False
        self._blocked_reason: str | None = None
        self.editor = MessageEdit(self.submit, self)
        self.send_button = QPushButton(self)
        self.send_button.setObjectName("sendButton")
        self.send_button.setDefault(True)
        self.send_button.clicked.connect(self.submit)
        self.stop_button = QPushButton(self)
        self.stop_button.setObjectName("stopButton")
        self.stop_button.clicked.connect(self._on_stop)
        #: Called with the text when "Send to several…" is clicked (``None``: no such button).
        self.on_several: Callable[[str], object] | None = None
        self.several_button = QPushButton(self)
        self.several_button.setObjectName("sendSeveralButton")
        self.several_button.clicked.connect(self.submit_several)
        buttons = QVBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.several_button)
        buttons.addWidget(self.stop_button)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 8)
        layout.addWidget(self.editor, 1)
        layout.addLayout(buttons)
        self.editor.textChanged.connect(self._render)
        self.retranslate_ui()

    def submit(self) -> None:
        """Send what is written (nothing happens while a turn runs or when empty)."""
        text = self.editor.toPlainText().strip()
        if not text or self._running or self._blocked_reason is not None:
            return
        self.editor.clear()
        self._on_send(text)

    def submit_several(self) -> None:
        """Hand what is written to "Send to several…" (kept until the choice is sent)."""
        text = self.editor.toPlainText().strip()
        if not text or self._running or self._blocked_reason is not None:
            return
        if self.on_several is not None:
            self.on_several(text)

    def set_running(self, running: bool) -> None:
        """Show Stop instead of Send while a turn runs."""
        self._running = running
        self._render()

    def set_blocked(self, reason: str | None) -> None:
        """Disable writing with a localized ``reason`` (``None`` enables it)."""
        self._blocked_reason = reason
        self._render()

    def _render(self) -> None:
        blocked = self._blocked_reason is not None
        self.editor.setReadOnly(blocked)
        self.send_button.setVisible(not self._running)
        self.stop_button.setVisible(self._running)
        has_text = bool(self.editor.toPlainText().strip())
        self.send_button.setEnabled(not blocked and not self._running and has_text)
        self.stop_button.setEnabled(self._running)
        self.several_button.setVisible(not self._running)
        self.several_button.setEnabled(not blocked and not self._running and has_text)
        self.editor.setPlaceholderText(
            # TRANSLATORS: keep the key names Enter and Shift+Enter as they are printed on keys.
            self._blocked_reason or _("Type a message… (Enter to send, Shift+Enter for a new line)")
        )

    def retranslate_ui(self) -> None:
        """Re-render every localized text."""
        self.send_button.setText(_("Send"))
        self.stop_button.setText(_("Stop"))
        self.several_button.setText(_("Send to several…"))
        self.several_button.setToolTip(
            _("Ask several models, or one model several times; each answer is its own branch")
        )
        self.editor.setAccessibleName(_("Message"))
        self._render()
