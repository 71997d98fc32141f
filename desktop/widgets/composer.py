"""Where the user writes: multi-line, Enter sends, Shift+Enter starts a new line.

While a turn runs the Send button becomes Stop; a read-only conversation
disables the composer and says why. Files are attached with the Attach
button, by dropping them on the composer, or by pasting an image; the host
reads them (never this widget) and they show as chips above the editor
until the prompt is sent. A prompt whose files are refused stays as it was.
"Send to several…" hands the text to whoever set :attr:`Composer.on_several`
(the window asks which models).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMimeData, QSize, Qt
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QImage, QImageWriter, QKeyEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.conversation.attachments import PreparedAttachment
from branchwise.core.i18n.language import _
from branchwise.desktop.widgets.attachment_chips import AttachmentStrip, ChipData


class ComposerAttaching(Protocol):
    """What the composer asks of its tab to attach files and send them."""

    def read(self, paths: list[Path]) -> None:
        """Read and judge ``paths``; accepted ones come back through ``add_attachments``."""
        ...

    def paste(self, data: bytes) -> None:
        """Judge a pasted image (PNG bytes)."""
        ...

    def send(self, text: str, files: tuple[PreparedAttachment, ...]) -> None:
        """Send ``text`` with ``files``; a refusal comes back through ``restore``."""
        ...


def _local_files(source: QMimeData) -> list[Path]:
    """The local files a drop or a paste names (none for text or web links)."""
    if not source.hasUrls():
        return []
    return [Path(url.toLocalFile()) for url in source.urls() if url.isLocalFile()]


class MessageEdit(QPlainTextEdit):
    """A plain-text editor where Enter submits and Shift+Enter inserts a newline.

    Args:
        on_submit: called when Enter is pressed.
    """

    def __init__(self, on_submit: Callable[[], None], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._on_submit = on_submit
        self.on_files: Callable[[QMimeData], bool] | None = None
        self.setObjectName("messageEdit")
        self.setTabChangesFocus(True)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:  # noqa: N802 - Qt override
        """Files and images can be pasted or dropped here (when attaching is offered)."""
        if self.on_files is not None and (source.hasImage() or _local_files(source)):
            return True
        return super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:  # noqa: N802 - Qt override
        """A pasted or dropped image or file is attached, not inserted as text."""
        if self.on_files is not None and self.on_files(source):
            return
        super().insertFromMimeData(source)

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
        attach: ComposerAttaching | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        self._on_send = on_send
        self._on_stop = on_stop
        self._attach = attach
        self._running = False
        self._blocked_reason: str | None = None
        self.pending: list[PreparedAttachment] = []
        self.editor = MessageEdit(self.submit, self)
        self.attachments = AttachmentStrip(self, self._remove_attachment)
        self.attach_button = QToolButton(self)
        self.attach_button.setObjectName("attachButton")
        self.attach_button.clicked.connect(self.pick_files)
        self.attach_button.setVisible(attach is not None)
        self.file_dialog: QFileDialog | None = None
        if attach is not None:
            self.editor.on_files = self._attach_mime
            self.setAcceptDrops(True)
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
        buttons.addWidget(self.attach_button)
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.several_button)
        buttons.addWidget(self.stop_button)
        writing = QVBoxLayout()
        writing.setSpacing(4)
        writing.addWidget(self.attachments)
        writing.addWidget(self.editor, 1)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 8)
        layout.addLayout(writing, 1)
        layout.addLayout(buttons)
        self.editor.textChanged.connect(self._render)
        self.retranslate_ui()

    def submit(self) -> None:
        """Send what is written (nothing happens while a turn runs or when empty)."""
        text = self.editor.toPlainText().strip()
        if not text or self._running or self._blocked_reason is not None:
            return
        self.editor.clear()
        if self.pending and self._attach is not None:
            self._attach.send(text, self.take_attachments())
            return
        self._on_send(text)

    # -- attachments ---------------------------------------------------------

    def pick_files(self) -> None:
        """Open the file picker (its choice is attached)."""
        if self._attach is None:
            return
        self.file_dialog = QFileDialog(self, _("Attach files"))
        self.file_dialog.setFileMode(QFileDialog.FileMode.ExistingFiles)
        self.file_dialog.filesSelected.connect(
            lambda names: self._attach.read([Path(n) for n in names]) if self._attach else None
        )
        self.file_dialog.open()

    def add_attachments(self, files: Sequence[PreparedAttachment]) -> None:
        """Files the host read and accepted: shown as chips until the prompt is sent."""
        self.pending.extend(files)
        self._render_attachments()

    def take_attachments(self) -> tuple[PreparedAttachment, ...]:
        """The pending files, handed over to be sent (the chips go; :meth:`restore` puts
        them back when the sending is refused)."""
        files = tuple(self.pending)
        self.pending = []
        self._render_attachments()
        return files

    def restore(self, text: str, files: Sequence[PreparedAttachment]) -> None:
        """Put back a prompt whose sending was refused (what was typed since is kept after it)."""
        typed = self.editor.toPlainText()
        self.editor.setPlainText(text + ("\n" + typed if typed.strip() else ""))
        self.pending = [*files, *self.pending]
        self._render_attachments()

    def _remove_attachment(self, key: str) -> None:
        index = int(key)
        if 0 <= index < len(self.pending):
            del self.pending[index]
        self._render_attachments()

    def _render_attachments(self) -> None:
        self.attachments.set_chips(
            [
                ChipData(
                    str(n),
                    f.name,
                    f.type,
                    len(f.data),
                    f.pages,
                    f.data if f.is_image else None,
                )
                for n, f in enumerate(self.pending)
            ]
        )

    def _attach_mime(self, source: QMimeData) -> bool:
        """Attach the files or the image in ``source``; ``False`` when it holds neither."""
        if self._attach is None or self._blocked_reason is not None:
            return False
        paths = _local_files(source)
        if paths:
            self._attach.read(paths)
            return True
        if source.hasImage():
            image = QImage(source.imageData())
            if image.isNull():
                return False
            buffer = QBuffer()
            buffer.open(QIODevice.OpenModeFlag.WriteOnly)
            QImageWriter(buffer, QByteArray(b"png")).write(image)
            self._attach.paste(bytes(buffer.data().data()))
            return True
        return False

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt override
        """Files and images may be dropped anywhere on the composer."""
        mime = event.mimeData()
        if self._attach is not None and (mime.hasImage() or _local_files(mime)):
            event.acceptProposedAction()
            return
        super().dragEnterEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 - Qt override
        """Attach what was dropped."""
        if self._attach_mime(event.mimeData()):
            event.acceptProposedAction()
            return
        super().dropEvent(event)

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
        self.attach_button.setText(_("Attach…"))
        self.attach_button.setToolTip(
            _("Attach images, text files or PDFs (or drop them here, or paste an image)")
        )
        self.attachments.retranslate_ui()
        self.several_button.setText(_("Send to several…"))
        self.several_button.setToolTip(
            _("Ask several models, or one model several times; each answer is its own branch")
        )
        self.editor.setAccessibleName(_("Message"))
        self._render()
