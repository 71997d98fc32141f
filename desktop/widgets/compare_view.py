"""Compare two conversations of one tree side by side, from where they split.

Two columns, one per conversation, each listing its turns after the split
point by position; a prompt both sides asked is marked "Same prompt", and
where the two answers to it differ the differing words are highlighted (see
``desktop/host/compare_rows.py``). The columns scroll together so turn N of
one stays beside turn N of the other.
"""

from __future__ import annotations

import html
from collections.abc import Callable

import shiboken6
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.conversation.compare import Comparison, SideTurn
from branchwise.core.i18n.language import _
from branchwise.core.i18n.reasons import fill
from branchwise.desktop.host.compare_rows import CompareRow, Span, compare_rows
from branchwise.desktop.host.host import Host
from branchwise.desktop.widgets.turn_widget import untitled

HIGHLIGHT = "#ffe08a"
SESSION_ROLE = Qt.ItemDataRole.UserRole


class PickConversationDialog(QDialog):
    """A list of the other conversations of one tree, to compare with.

    Args:
        choices: ``(session_id, title)`` pairs, in the order to show them.
    """

    def __init__(self, choices: list[tuple[str, str]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("pickConversationDialog")
        self.setWindowTitle(_("Compare with…"))
        self.list = QListWidget(self)
        self.list.setObjectName("compareChoices")
        for session_id, title in choices:
            item = QListWidgetItem(untitled(title), self.list)
            item.setData(SESSION_ROLE, session_id)
        if choices:
            self.list.setCurrentRow(0)
        self.list.itemActivated.connect(lambda _item: self.accept())
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self
        )
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText(_("Compare"))
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(_("Compare with which conversation of this tree?"), self))
        layout.addWidget(self.list, 1)
        layout.addWidget(buttons)

    def chosen(self) -> str | None:
        """The highlighted conversation's id."""
        item = self.list.currentItem()
        return item.data(SESSION_ROLE) if item is not None else None


class CompareView(QDialog):
    """Two conversations side by side from their split point.

    Args:
        comparison: what ``core.conversation.compare.compare`` found.
        split_title, split_turn: the shared conversation and its last shared turn (0: none).
    """

    def __init__(
        self,
        comparison: Comparison,
        split_title: str,
        split_turn: int,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("compareView")
        self.setWindowTitle(_("Compare conversations"))
        self.resize(980, 640)
        if split_turn:
            header = fill(
                # TRANSLATORS: {turn} is a turn number, {title} a conversation's title.
                _("Split after turn {turn} of {title}"),
                {"turn": split_turn, "title": untitled(split_title)},
            )
        else:
            header = fill(_("Split at the start of {title}"), {"title": untitled(split_title)})
        self.header = QLabel(header, self)
        self.header.setObjectName("compareHeader")
        self.header.setTextFormat(Qt.TextFormat.PlainText)
        rows = compare_rows(comparison)
        self.left = self._column("compareLeft", rows, left=True)
        self.right = self._column("compareRight", rows, left=False)
        grid = QGridLayout()
        for column, side in enumerate((comparison.left, comparison.right)):
            title = QLabel(untitled(side.title), self)
            title.setTextFormat(Qt.TextFormat.PlainText)
            title.setStyleSheet("font-weight: bold")
            grid.addWidget(title, 0, column)
        grid.addWidget(self.left, 1, 0)
        grid.addWidget(self.right, 1, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addLayout(grid, 1)
        layout.addWidget(buttons)
        self._syncing = False
        self.left.verticalScrollBar().valueChanged.connect(
            lambda value: self._follow(self.right, value)
        )
        self.right.verticalScrollBar().valueChanged.connect(
            lambda value: self._follow(self.left, value)
        )

    def _column(self, name: str, rows: list[CompareRow], *, left: bool) -> QTextBrowser:
        view = QTextBrowser(self)
        view.setObjectName(name)
        view.setOpenLinks(False)
        parts = []
        for row in rows:
            turn = row.left if left else row.right
            spans = row.left_answer if left else row.right_answer
            parts.append(_row_html(row, turn, spans))
        if not rows:
            empty = html.escape(_("No turns after the split."))
            parts.append(f"<p><i>{empty}</i></p>")
        view.setHtml("".join(parts))
        return view

    def _follow(self, other: QTextBrowser, value: int) -> None:
        """Scroll the other column to the same place (once: it echoes back otherwise)."""
        if self._syncing:
            return
        self._syncing = True
        try:
            other.verticalScrollBar().setValue(value)
        finally:
            self._syncing = False


def show_comparison(
    host: Host,
    session_id: str,
    other_id: str,
    parent: QWidget,
    shown: Callable[[CompareView], None],
) -> None:
    """Ask the host to compare two conversations; ``shown`` gets the opened view.

    The logs are read off the UI thread; a refusal is the host's notice.
    """

    async def ask() -> None:
        compared = await host.operations.compare(session_id, other_id)
        if compared is None or not shiboken6.isValid(parent):
            return
        view = CompareView(
            compared.comparison, compared.common_title, compared.shared_turns, parent
        )
        view.show()
        shown(view)

    host.spawn(ask(), "compare conversations")


def _row_html(row: CompareRow, turn: SideTurn | None, spans: tuple[Span, ...]) -> str:
    heading = html.escape(fill(_("Turn {n}"), {"n": row.position}))
    parts = [f"<h3>{heading}</h3>"]
    if turn is None:
        missing = html.escape(_("No turn here."))
        parts.append(f"<p><i>{missing}</i></p>")
        return "".join(parts)
    if row.same_prompt:
        same = html.escape(_("Same prompt"))
        parts.append(f"<p><b>{same}</b></p>")
    parts.append(f"<p><b>&gt;</b> {_text(turn.prompt)}</p>")
    answer = "".join(
        f'<span style="background-color:{HIGHLIGHT}">{_text(s.text)}</span>'
        if s.changed
        else _text(s.text)
        for s in spans
    )
    parts.append(f"<p>{answer}</p><hr/>")
    return "".join(parts)


def _text(text: str) -> str:
    return html.escape(text).replace("\n", "<br/>")
