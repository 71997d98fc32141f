"""Search across every conversation: the field above the sidebar and its results.

Typing runs the host's search after a short pause (a restarted timer, never
a sleep), off the UI thread; while the field holds text the results replace
the conversation tree, and Esc clears the field and brings the tree back.
Each result shows the conversation that wrote the message (for one that
branches inherited, the ancestor) with its label, who wrote it and the
snippet (plain text) with the matches highlighted; a message that branches
inherited offers "also in N branches", a menu of those conversations with
their labels. While the index
catches up with every conversation the field's status line counts them.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import shiboken6
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent, QKeySequence, QMouseEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.i18n.language import _, format_number, ngettext
from branchwise.core.i18n.reasons import fill
from branchwise.core.search.query import SearchHit, SearchResult
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.conversation import ConversationRef
from branchwise.desktop.host.host import Host
from branchwise.desktop.widgets.theme import theme_colors
from branchwise.desktop.widgets.turn_widget import untitled

#: Pause after the last keystroke before the query runs.
DEBOUNCE_MS = 200
#: Results asked of the index per query.
RESULT_LIMIT = 50
#: The shortcut that puts the cursor in the search field (the window's action).
SHORTCUT = "Ctrl+K"

OpenHit = Callable[[str, str], None]


def role_name(role: str) -> str:
    """Who wrote a hit's text, in the active language."""
    if role == "user":
        return _("You")
    if role == "assistant":
        return _("Assistant")
    if role == "title":
        return _("Title")
    return role


def also_in_text(n: int) -> str:
    """``"also in 2 branches"``."""
    return fill(ngettext("also in {n} branch", "also in {n} branches", n), {"n": format_number(n)})


def highlighted(snippet: str, spans: tuple[tuple[int, int], ...]) -> str:
    """The snippet as rich text: every character escaped, the spans highlighted."""
    parts: list[str] = []
    at = 0
    hit = f"background-color:{theme_colors().search_hit}; font-weight:600;"
    for start, end in sorted(spans):
        start, end = max(start, at), min(end, len(snippet))
        if start >= end:
            continue
        parts.append(html.escape(snippet[at:start]))
        parts.append(f'<span style="{hit}">{html.escape(snippet[start:end])}</span>')
        at = end
    parts.append(html.escape(snippet[at:]))
    return "".join(parts)


class SearchField(QLineEdit):
    """The search line edit; Esc clears it (and so brings the tree back)."""

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        """Esc clears a non-empty field; Down moves into the results."""
        if event.key() == Qt.Key.Key_Escape and self.text():
            self.clear()
            event.accept()
            return
        if event.key() == Qt.Key.Key_Down:
            self.focusNextChild()
            event.accept()
            return
        super().keyPressEvent(event)


@dataclass(frozen=True, slots=True)
class RemoteResults:
    """One server's answer to a search, and how to show and open its hits.

    Attributes:
        server_name: the server's name in the sidebar (each of its hits says it).
        result: the server's hits.
        title_of: a conversation's title on that server (for "also in").
        open_hit: opens one of its conversations at a message.
        label_of: a branch's label on that server (``None`` for a root).
    """

    server_name: str
    result: SearchResult
    title_of: Callable[[str], str]
    open_hit: OpenHit
    label_of: Callable[[str], str | None] = lambda _session_id: None


#: Searches the connected servers: ``await remote_search(query, limit)``.
RemoteSearch = Callable[[str, int], Awaitable[list[RemoteResults]]]


class ResultRow(QFrame):
    """One hit: the conversation that wrote it and its label, role, highlighted snippet,
    and "also in N branches" (a menu of their titles and labels).

    Args:
        hit: what it shows.
        title_of: the titles of the other conversations ("also in").
        on_open: ``on_open(session_id, message_id)`` opens a conversation at a message.
        server_name: the server that keeps the conversation; ``None`` for this machine.
        label_of: a conversation's branch label (``None`` for a root), rendered when shown.
    """

    def __init__(
        self,
        hit: SearchHit,
        title_of: Callable[[str], str],
        on_open: OpenHit,
        parent: QWidget,
        server_name: str | None = None,
        label_of: Callable[[str], str | None] = lambda _session_id: None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("searchResult")
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.hit = hit
        self.server_name = server_name
        self._title_of = title_of
        self._label_of = label_of
        self._on_open = on_open
        self.title_label = QLabel(self)
        self.title_label.setObjectName("searchResultTitle")
        self.title_label.setTextFormat(Qt.TextFormat.PlainText)
        self.title_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.role_label = QLabel(self)
        self.role_label.setObjectName("searchResultRole")
        self.role_label.setTextFormat(Qt.TextFormat.PlainText)
        self.snippet_label = QLabel(self)
        self.snippet_label.setObjectName("searchResultSnippet")
        self.snippet_label.setTextFormat(Qt.TextFormat.RichText)
        self.snippet_label.setWordWrap(True)
        self.snippet_label.setText(highlighted(hit.snippet, hit.spans))
        self.also_button = QToolButton(self)
        self.also_button.setObjectName("searchAlsoIn")
        self.also_button.setAutoRaise(True)
        self.also_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.also_button.setMenu(QMenu(self.also_button))
        self.also_button.setVisible(bool(hit.also_in))
        top = QHBoxLayout()
        top.setSpacing(6)
        top.addWidget(self.title_label, 1)
        top.addWidget(self.role_label)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.setSpacing(2)
        layout.addLayout(top)
        layout.addWidget(self.snippet_label)
        layout.addWidget(self.also_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.retranslate_ui()

    def open(self) -> None:
        """Open the hit's conversation at its message."""
        self._on_open(self.hit.session_id, self.hit.message_id)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        """A click opens the hit."""
        if event.button() == Qt.MouseButton.LeftButton:
            self.open()
            event.accept()
            return
        super().mouseReleaseEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        """Enter or Space opens the hit."""
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space):
            self.open()
            event.accept()
            return
        super().keyPressEvent(event)

    def retranslate_ui(self) -> None:
        """Re-render every localized text."""
        hit = self.hit
        title = self._named(hit.session_id, hit.title)
        if self.server_name is not None:
            title = fill(_("{title} on {server}"), {"title": title, "server": self.server_name})
        role = role_name(hit.role)
        self.title_label.setText(title)
        self.title_label.setToolTip(title)
        self.role_label.setText(role)
        self.setAccessibleName(
            fill(
                _("{title}, {role}: {text}"),
                {
                    "title": title,
                    "role": role,
                    "text": hit.snippet,
                },
            )
        )
        self.setToolTip(_("Open this conversation at the message"))
        menu = self.also_button.menu()
        menu.clear()
        if hit.also_in:
            text = also_in_text(len(hit.also_in))
            self.also_button.setText(text)
            self.also_button.setAccessibleName(text)
            self.also_button.setToolTip(_("Other conversations that contain this message"))
            for session_id in hit.also_in:
                action = menu.addAction(self._named(session_id, self._title_of(session_id)))
                action.triggered.connect(
                    lambda _checked=False, sid=session_id: self._on_open(sid, hit.message_id)
                )

    def _named(self, session_id: str, title: str) -> str:
        """ "<title> · <label>" for a branch, the title alone for a root."""
        label = self._label_of(session_id)
        return f"{untitled(title)} · {label}" if label else untitled(title)


class SearchPanel(QWidget):
    """The search field with its status line, and the results view it fills.

    The window puts ``results_view`` where the conversation tree is and shows
    it while :attr:`searching` (the field holds text).

    Args:
        host: runs the queries and reports the index's progress.
        on_open: ``on_open(session_id, message_id)`` opens a hit.

    Signals:
        searching_changed(bool): the field became non-empty, or empty again.
        results_shown(): a query's results are on screen.
    """

    searching_changed = Signal(bool)
    results_shown = Signal()

    def __init__(self, host: Host, on_open: OpenHit, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("searchPanel")
        self.host = host
        self._on_open = on_open
        self._generation = 0
        self._searching = False
        self.result: SearchResult | None = None
        self.remote_results: list[RemoteResults] = []
        self.remote_search: RemoteSearch | None = None
        """Set by the window while servers are connected: their hits follow this machine's."""
        self.field = SearchField(self)
        self.field.setObjectName("searchField")
        self.field.setClearButtonEnabled(True)
        self.field.textChanged.connect(self._text_changed)
        self.status_label = QLabel(self)
        self.status_label.setObjectName("searchStatus")
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)
        self.status_label.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.field)
        layout.addWidget(self.status_label)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self._run_query)

        self.results_view = QScrollArea()
        self.results_view.setObjectName("searchResults")
        self.results_view.setWidgetResizable(True)
        self.results_view.setFrameShape(QFrame.Shape.NoFrame)
        self.results_view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget(self.results_view)
        body.setObjectName("searchResultsBody")
        self._results_layout = QVBoxLayout(body)
        self._results_layout.setContentsMargins(6, 4, 0, 4)
        self._results_layout.setSpacing(2)
        self.empty_label = QLabel(body)
        self.empty_label.setObjectName("searchEmpty")
        self.empty_label.setTextFormat(Qt.TextFormat.PlainText)
        self.empty_label.setWordWrap(True)
        self.empty_label.hide()
        self._results_layout.addWidget(self.empty_label)
        self._results_layout.addStretch(1)
        self.results_view.setWidget(body)
        self._results_body = body
        self._rows: list[ResultRow] = []
        self.retranslate_ui()

    # -- what the UI exposes -------------------------------------------------

    @property
    def searching(self) -> bool:
        """The field holds a query, so results replace the tree."""
        return self._searching

    def result_rows(self) -> list[ResultRow]:
        """The results shown, best first."""
        return list(self._rows)

    def focus_field(self) -> None:
        """Ctrl+K: put the cursor in the field, its text selected."""
        self.field.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.field.selectAll()

    # -- querying ----------------------------------------------------------------

    def _text_changed(self, text: str) -> None:
        searching = bool(text.strip())
        if searching:
            self._timer.start()  # restarted by every keystroke
        else:
            self._timer.stop()
            self._generation += 1  # a query still running is not shown
            self._show(None)
        if searching != self._searching:
            self._searching = searching
            self.searching_changed.emit(searching)

    def _run_query(self) -> None:
        query = self.field.text().strip()
        if not query:
            return
        self._generation += 1
        self.host.spawn(self._query(query, self._generation), "search")

    async def _query(self, query: str, generation: int) -> None:
        remote: list[RemoteResults] = []
        if self.remote_search is None:
            result = await self.host.search(query, limit=RESULT_LIMIT)
        else:
            # This machine's index and every connected server's, at once.
            result, remote = await asyncio.gather(
                self.host.search(query, limit=RESULT_LIMIT),
                self.remote_search(query, RESULT_LIMIT),
            )
        if not shiboken6.isValid(self) or generation != self._generation:
            return  # the user typed on, or the window is gone
        self._show(result, remote)
        self.results_shown.emit()

    def apply_changes(self, changes: Changes) -> None:
        """The index moved on: show its progress, and refresh the results shown."""
        if not changes.search:
            return
        self._render_status()
        if self._searching and not self._timer.isActive():
            self._timer.start()  # not restarted: results still come while indexing

    # -- rendering ---------------------------------------------------------------

    def _label_of(self, session_id: str) -> str | None:
        return self.host.label_at(ConversationRef(session_id))

    def _show(self, result: SearchResult | None, remote: list[RemoteResults] | None = None) -> None:
        """This machine's hits first, then each server's (each saying which server)."""
        self.result = result
        self.remote_results = list(remote or [])
        for row in self._rows:
            self._results_layout.removeWidget(row)
            row.hide()
            row.deleteLater()
        self._rows = []
        body = self._results_body
        for hit in result.hits if result is not None else ():
            row = ResultRow(hit, self.host.title, self._on_open, body, label_of=self._label_of)
            self._rows.append(row)
        for answer in self.remote_results:
            for hit in answer.result.hits:
                row = ResultRow(
                    hit,
                    answer.title_of,
                    answer.open_hit,
                    body,
                    answer.server_name,
                    label_of=answer.label_of,
                )
                self._rows.append(row)
        for position, row in enumerate(self._rows):
            self._results_layout.insertWidget(1 + position, row)
        self._render_empty()

    def _render_empty(self) -> None:
        result = self.result
        empty = (
            result is not None
            and not result.hits
            and not any(answer.result.hits for answer in self.remote_results)
        )
        self.empty_label.setVisible(empty)
        if empty:
            self.empty_label.setText(
                fill(_("No conversation contains “{query}”."), {"query": self.field.text().strip()})
            )

    def _render_status(self) -> None:
        progress = self.host.search_progress
        if progress is None:
            self.status_label.hide()
            self.field.setAccessibleDescription("")
            return
        done, total = progress
        text = (
            fill(
                _("Indexing {done} of {total}…"),
                {"done": format_number(done), "total": format_number(total)},
            )
            if total
            else _("Indexing…")
        )
        self.status_label.setText(text)
        self.status_label.setToolTip(_("Search results may be incomplete until indexing ends."))
        self.status_label.show()
        self.field.setAccessibleDescription(text)

    def retranslate_ui(self) -> None:
        """Re-render every localized text."""
        self.field.setPlaceholderText(_("Search all conversations"))
        self.field.setAccessibleName(_("Search all conversations"))
        self.field.setToolTip(
            fill(
                _("Search the messages and titles of every conversation ({shortcut})"),
                {
                    "shortcut": QKeySequence(SHORTCUT).toString(
                        QKeySequence.SequenceFormat.NativeText
                    )
                },
            )
        )
        self.results_view.setAccessibleName(_("Search results"))
        self._render_status()
        self._render_empty()
        for row in self._rows:
            row.retranslate_ui()
