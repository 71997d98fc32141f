"""Find in the open conversation (Ctrl+F): a bar above the composer.

It searches the conversation's loaded rows — every row the host holds, not
only the ones with widgets — case-insensitively, counts the matches, and
steps through them with Next / Previous (Enter / Shift+Enter), bringing each
one's turn into view and flashing it. Esc closes it. No index is involved.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QLineEdit, QToolButton, QWidget

from branchwise.core.i18n.language import _, format_number
from branchwise.core.i18n.reasons import fill
from branchwise.desktop.host.rows import Row


@dataclass(frozen=True, slots=True)
class Match:
    """One occurrence of the text sought.

    Attributes:
        position: the row's position in the conversation.
        message_id: the message it is in.
        start: its character offset in the message.
    """

    position: int
    message_id: str
    start: int


def find_matches(rows: list[Row], text: str) -> list[Match]:
    """Every case-insensitive occurrence of ``text`` in the rows' messages, in order."""
    needle = text.casefold()
    if not needle:
        return []
    found = []
    for position, row in enumerate(rows):
        for entry in row.entries:
            haystack = entry.content.casefold()
            if len(haystack) != len(entry.content):
                haystack = entry.content.lower()  # keep offsets aligned with the text
            at = haystack.find(needle)
            while at >= 0:
                found.append(Match(position, entry.message_id, at))
                at = haystack.find(needle, at + len(needle))
    return found


class _FindField(QLineEdit):
    """Enter: next match; Shift+Enter: previous; Esc: close."""

    def __init__(self, bar: FindBar) -> None:
        super().__init__(bar)
        self._bar = bar

    def event(self, event: QEvent) -> bool:
        """Esc belongs to the bar while it has focus, not to the window's Stop shortcut."""
        if (
            event.type() == QEvent.Type.ShortcutOverride
            and isinstance(event, QKeyEvent)
            and event.key() == Qt.Key.Key_Escape
        ):
            event.accept()
            return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        """Step through matches, or close the bar."""
        key = event.key()
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self._bar.previous()
            else:
                self._bar.next()
            event.accept()
            return
        if key == Qt.Key.Key_Escape:
            self._bar.close_bar()
            event.accept()
            return
        super().keyPressEvent(event)


class FindBar(QFrame):
    """Find text in one conversation.

    Args:
        rows: the conversation's loaded rows, asked for at each search.
        reveal: ``reveal(match)`` brings a match into view.

    Signals:
        closed(): the bar was closed (Esc or its close button).
    """

    closed = Signal()

    def __init__(
        self,
        rows: Callable[[], list[Row]],
        reveal: Callable[[Match], None],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("findBar")
        self._rows = rows
        self._reveal = reveal
        self.matches: list[Match] = []
        self.current: int | None = None
        self.field = _FindField(self)
        self.field.setObjectName("findField")
        self.field.textChanged.connect(self.search)
        self.count_label = QLabel(self)
        self.count_label.setObjectName("findCount")
        self.count_label.setTextFormat(Qt.TextFormat.PlainText)
        self.previous_button = QToolButton(self)
        self.previous_button.setObjectName("findPrevious")
        self.previous_button.setArrowType(Qt.ArrowType.UpArrow)
        self.previous_button.setAutoRaise(True)
        self.previous_button.clicked.connect(self.previous)
        self.next_button = QToolButton(self)
        self.next_button.setObjectName("findNext")
        self.next_button.setArrowType(Qt.ArrowType.DownArrow)
        self.next_button.setAutoRaise(True)
        self.next_button.clicked.connect(self.next)
        self.close_button = QToolButton(self)
        self.close_button.setObjectName("findClose")
        self.close_button.setText("✕")
        self.close_button.setAutoRaise(True)
        self.close_button.clicked.connect(self.close_bar)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 4, 12, 4)
        layout.setSpacing(4)
        layout.addWidget(self.field, 1)
        layout.addWidget(self.count_label)
        layout.addWidget(self.previous_button)
        layout.addWidget(self.next_button)
        layout.addWidget(self.close_button)
        self.hide()
        self.retranslate_ui()

    def open_bar(self) -> None:
        """Show the bar with the cursor in its field (the last text selected)."""
        self.show()
        self.field.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.field.selectAll()
        if self.field.text():
            self.search(self.field.text())

    def close_bar(self) -> None:
        """Hide the bar."""
        self.hide()
        self.closed.emit()

    def search(self, text: str) -> None:
        """Find ``text`` and show the last match (the one nearest the newest turn)."""
        self.matches = find_matches(self._rows(), text)
        self.current = len(self.matches) - 1 if self.matches else None
        self._go()

    def next(self) -> None:
        """The next match below (wrapping to the first)."""
        if self.matches:
            self.current = 0 if self.current is None else (self.current + 1) % len(self.matches)
            self._go()

    def previous(self) -> None:
        """The previous match above (wrapping to the last)."""
        if self.matches:
            self.current = (
                len(self.matches) - 1
                if self.current is None
                else (self.current - 1) % len(self.matches)
            )
            self._go()

    def _go(self) -> None:
        self._render_count()
        if self.current is not None:
            self._reveal(self.matches[self.current])

    def _render_count(self) -> None:
        has = bool(self.matches)
        self.previous_button.setEnabled(has)
        self.next_button.setEnabled(has)
        not_found = bool(self.field.text()) and not has
        self.field.setProperty("notFound", not_found)
        self.field.style().unpolish(self.field)
        self.field.style().polish(self.field)
        if not self.field.text():
            text = ""
        elif not has:
            text = _("No matches")
        else:
            text = fill(
                _("{current} of {total}"),
                {
                    "current": format_number((self.current or 0) + 1),
                    "total": format_number(len(self.matches)),
                },
            )
        self.count_label.setText(text)
        self.count_label.setAccessibleName(text)

    def retranslate_ui(self) -> None:
        """Re-render every localized text."""
        self.field.setPlaceholderText(_("Find in this conversation"))
        self.field.setAccessibleName(_("Find in this conversation"))
        self.field.setToolTip(_("Enter: next match, Shift+Enter: previous, Esc: close"))
        self.previous_button.setToolTip(_("Previous match"))
        self.previous_button.setAccessibleName(_("Previous match"))
        self.next_button.setToolTip(_("Next match"))
        self.next_button.setAccessibleName(_("Next match"))
        self.close_button.setToolTip(_("Close the find bar"))
        self.close_button.setAccessibleName(_("Close the find bar"))
        self._render_count()
