"""The transcript of one conversation: a paged list of turn widgets.

Only a window of rows has widgets — the last page when a conversation opens,
extended a page at a time when the user scrolls to the top (or clicks "Show
earlier turns") — so a 10,000-turn conversation opens with about fifty turn
widgets, and every visible turn still has a real, findable branch button. A
server's big conversation may hold only its last page of rows; scrolling up
past them asks the host for the earlier turns, and the window grows by a page
once they are there.

Laying out word-wrapped Markdown is the expensive part of a turn widget, so
only the last few rows are built before the first paint; the rest of the
page is built a few rows per event-loop turn, above what the user is reading,
without moving it. The view follows the bottom while an answer streams,
unless the user has scrolled away to read.

:meth:`TranscriptView.reveal` brings any row into view — a search hit or a
find-bar match — extending the window up to it and building its widget at
once; the row stays pinned in view while the rows around it are built.
:meth:`TranscriptView.land` does the same for a jump to a turn (open parent,
a brought-back card, a switch of alternatives) and highlights the turn until
the reader scrolls. Each turn with alternatives shows ``< k/n >`` from the
host's sibling sets (docs/architecture.md, "Alternatives at a turn").
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence

import shiboken6
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.conversation.alternatives import Alternatives
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.i18n.language import _, format_number
from branchwise.core.i18n.reasons import fill, reason_text
from branchwise.core.lineage import LineageIndex
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.store.manifest import Manifest
from branchwise.desktop.host.attaching import Preview
from branchwise.desktop.host.conversation import ConversationRef
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.landing import TurnTarget
from branchwise.desktop.host.rows import PAGE_SIZE, FusedSource, Row, Window
from branchwise.desktop.widgets.compare_view import CompareView, show_compare
from branchwise.desktop.widgets.turn_widget import AskAgain, Switch, TurnWidget, untitled

#: Pixels from the bottom that still count as "at the bottom".
STICK_SLACK = 24
#: Rows built before the first paint (enough to fill a window).
FIRST_ROWS = 6
#: Rows built per event-loop turn after that.
FILL_ROWS = 6
#: How long a revealed row stays pinned in view while rows around it are built.
PIN_MS = 1500


class TranscriptView(QScrollArea):
    """Turn widgets for a window of a session's rows.

    Args:
        host: the host (rows, branch states and branches come from it).
        ref: the conversation shown (on this machine or on a server).
        on_branch: a branch action was clicked (with the fork request it carries).
        on_open: a listed branch should be opened.
        page_size: rows per page.
        on_switch: another alternative at a turn should be shown (in the same tab).
        on_open_at: a conversation should be opened at a turn (a brought-back card).
    """

    def __init__(
        self,
        host: Host,
        ref: ConversationRef,
        on_branch: Callable[[ForkRequest], None],
        on_open: Callable[[str], None],
        page_size: int = PAGE_SIZE,
        parent: QWidget | None = None,
        on_switch: Switch | None = None,
        on_open_at: Callable[[str, TurnTarget], object] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("transcript")
        self._on_switch = on_switch
        self._on_open_at = on_open_at
        self._landed: TurnWidget | None = None
        self.host = host
        self.compare_view: CompareView | None = None
        self.ref = ref
        self.session_id = ref.session_id
        self.page_size = page_size
        self._on_branch = on_branch
        self._on_open = on_open
        self._window = Window(0, 0)
        self._widgets: dict[str, TurnWidget] = {}
        self._positions: list[int] = []  # row positions of the widgets, in layout order
        self._stick = True
        self._keep_bottom_distance: int | None = None
        self._loading_earlier = False
        self._earlier_asked = False
        self._filling = False
        self._pinned: TurnWidget | None = None
        self._unpin = QTimer(self)
        self._unpin.setSingleShot(True)
        self._unpin.setInterval(PIN_MS)
        self._unpin.timeout.connect(self._release_pin)

        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget(self)
        body.setObjectName("transcriptBody")
        # Word-wrapped labels report minimum heights measured at a narrow width; left
        # as the body's minimum they make it taller than its content (a blank tail
        # under the last turn). With an explicit minimum, height-for-width decides.
        body.setMinimumHeight(1)
        self._layout = QVBoxLayout(body)
        self._layout.setContentsMargins(0, 6, 0, 6)
        self._layout.setSpacing(2)
        self.earlier_button = QPushButton(body)
        self.earlier_button.setObjectName("earlierButton")
        self.earlier_button.setFlat(True)
        self.earlier_button.clicked.connect(self.load_earlier)
        self._layout.addWidget(self.earlier_button, 0, Qt.AlignmentFlag.AlignHCenter)
        self._layout.addStretch(1)
        self.setWidget(body)
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._scrolled)
        bar.rangeChanged.connect(self._range_changed)
        # Only the reader's own scrolling (wheel, keys, the bar) triggers actions.
        bar.actionTriggered.connect(self._reader_scrolled)
        self.retranslate_ui()
        self.reload()

    # -- what the UI exposes -------------------------------------------------

    def turn_widgets(self) -> list[TurnWidget]:
        """The turn widgets in display order."""
        found = []
        for position in range(self._layout.count()):
            item = self._layout.itemAt(position)
            widget = item.widget() if item is not None else None
            if isinstance(widget, TurnWidget):
                found.append(widget)
        return found

    @property
    def complete(self) -> bool:
        """Every row of the window has its widget."""
        return len(self._widgets) == self._window.size

    def position_of_message(self, message_id: str) -> int | None:
        """The position of the row holding a message (``None`` if no row does)."""
        for position, row in enumerate(self._rows()):
            if any(entry.message_id == message_id for entry in row.entries):
                return position
        return None

    def position_of_row(self, row_id: str) -> int | None:
        """The position of a row (``None`` if the conversation has no such row)."""
        return next((p for p, row in enumerate(self._rows()) if row.row_id == row_id), None)

    def land(self, row_id: str) -> TurnWidget | None:
        """Bring a row into view and highlight it until the reader scrolls (a jump's landing)."""
        position = self.position_of_row(row_id)
        widget = self.reveal(position) if position is not None else None
        if widget is None:
            return None
        self._clear_landed()
        self._landed = widget
        widget.set_landed(True)
        return widget

    @property
    def landed(self) -> TurnWidget | None:
        """The turn highlighted as where the last jump landed, while it is."""
        widget = self._landed
        return widget if widget is not None and shiboken6.isValid(widget) else None

    def _clear_landed(self) -> None:
        widget, self._landed = self.landed, None
        if widget is not None:
            widget.set_landed(False)

    def _reader_scrolled(self, _action: int) -> None:
        if self._pinned is None:
            self._clear_landed()

    def switch_alternative(self, by: int) -> bool:
        """Alt+Left / Alt+Right: the alternative ``by`` places away at the turn being read.

        That turn is the one holding the keyboard focus, else, of the turns in
        view that have alternatives, the one nearest the middle of the view.
        Returns whether there was one to switch to.
        """
        with_sets = [w for w in self._widgets.values() if w.alternatives.alternatives is not None]
        focused = QApplication.focusWidget()
        for widget in with_sets:
            if focused is not None and (focused is widget or widget.isAncestorOf(focused)):
                return widget.alternatives.step(by)
        viewport = self.viewport()
        middle = viewport.height() / 2
        seen = []
        for widget in with_sets:
            top = widget.mapTo(viewport, widget.rect().topLeft()).y()
            bottom = top + widget.height()
            if bottom > 0 and top < viewport.height():
                seen.append((abs((top + bottom) / 2 - middle), widget))
        if not seen:
            return False
        return min(seen, key=lambda item: item[0])[1].alternatives.step(by)

    def reveal(self, position: int) -> TurnWidget | None:
        """Scroll the row at ``position`` into view, building it first if it has no widget.

        The window grows up to the row (a page boundary at most), and the row
        is pinned in view while the rows around it are built.
        """
        rows = self._rows()
        if not 0 <= position < len(rows):
            return None
        if position < self._window.start:
            start = position - (position % self.page_size)
            self._window = Window(start, self._window.end)
            self._update_earlier_button()
        row = rows[position]
        widget = self._widgets.get(row.row_id)
        if widget is None:
            widget = self._make(row)
            self._show_branches(
                widget,
                self._lineage.turns_with_branches(self.session_id),
                self.host.alternatives_at(self.ref),
            )
            self._insert(position, widget)
        self._stick = False
        self._keep_bottom_distance = None
        self._pinned = widget
        self._unpin.start()
        self._keep_pinned_in_view()
        QTimer.singleShot(0, self, self._keep_pinned_in_view)
        self._schedule_fill()
        return widget

    def _keep_pinned_in_view(self) -> None:
        widget = self._pinned
        if widget is None or not shiboken6.isValid(widget):
            self._pinned = None
            return
        body = self.widget()
        body_layout = body.layout() if body is not None else None
        if body_layout is not None:
            body_layout.activate()
        self.ensureWidgetVisible(widget, 0, 24)

    def _release_pin(self) -> None:
        self._keep_pinned_in_view()
        self._pinned = None

    # -- refreshing ------------------------------------------------------------

    def _rows(self) -> list[Row]:
        conversation = self.host.conversation(self.ref)
        return conversation.rows if conversation is not None else []

    @property
    def _lineage(self) -> LineageIndex:
        return self.host.lineage_at(self.ref)

    def reload(self) -> None:
        """Show the last page of the session's rows (after opening or a full re-read)."""
        rows = self._rows()
        size = max(self.page_size, self._window.size if self._window.end else 0)
        self._window = Window(max(0, len(rows) - size), len(rows))
        wanted = {row.row_id: position for position, row in enumerate(rows)}
        for row_id in list(self._widgets):
            position = wanted.get(row_id)
            if position is None or position < self._window.start:
                self._drop(row_id)
        # Positions shift when a preview is replaced by the full history.
        placed = sorted(
            ((wanted[row_id], widget) for row_id, widget in self._widgets.items()),
            key=lambda item: item[0],
        )
        for position, widget in placed:
            row = rows[position]
            if widget.row != row:
                widget.set_row(row)
            self._layout.removeWidget(widget)
        self._positions = []
        for position, widget in placed:
            self._insert(position, widget)
        self._build_missing(FIRST_ROWS)
        self.refresh_branch_states()
        self.refresh_branches()
        self._update_earlier_button()
        if self._earlier_asked and self._window.start > 0:
            # The earlier turns the user scrolled up to arrived: show their last page
            # above what they were reading, as a page already held is shown.
            self._earlier_asked = False
            self.load_earlier()
            return
        self._stick = True
        self._scroll_to_bottom()
        self._schedule_fill()

    def update_turns(self, turn_ids: Iterable[str]) -> None:
        """Refresh changed turns; a new trailing turn gets a widget."""
        session = self.host.conversation(self.ref)
        if session is None:
            return
        for turn_id in turn_ids:
            row = session.row(turn_id)
            if row is None:
                continue
            widget = self._widgets.get(turn_id)
            if widget is not None:
                widget.set_row(row)
                widget.set_branch_state(self.host.branch_state_at(self.ref, row))
            elif self._window.end == len(session.rows) - 1:
                self._window = Window(self._window.start, self._window.end + 1)
                self._insert(self._window.end - 1, self._make(row))

    def append_text(self, turn_id: str, message_id: str, chunk: str) -> None:
        """Streamed text of a running turn."""
        widget = self._widgets.get(turn_id)
        if widget is not None:
            widget.append_text(message_id, chunk)

    def refresh_branch_states(self) -> None:
        """Recompute every built branch action (targets or host state changed)."""
        for widget in self._widgets.values():
            widget.set_branch_state(self.host.branch_state_at(self.ref, widget.row))

    def refresh_branches(self) -> None:
        """Re-list the branches and alternatives of every built turn (a child was created)."""
        with_branches = self._lineage.turns_with_branches(self.session_id)
        alternatives = self.host.alternatives_at(self.ref)
        for widget in self._widgets.values():
            self._show_branches(widget, with_branches, alternatives)

    def _show_branches(
        self,
        widget: TurnWidget,
        with_branches: set[str],
        alternatives: dict[str, Alternatives],
    ) -> None:
        turn_id = widget.row.turn_id
        if turn_id is not None and turn_id in with_branches:
            widget.set_branches(self._lineage.branches_at(self.session_id, turn_id))
        else:
            widget.set_branches(())
        found = alternatives.get(turn_id) if turn_id is not None else None
        widget.set_alternatives(found, self.session_id)

    def _label_of(self, manifest: Manifest) -> str:
        """How the switcher names an alternative: its label, else (the original) its title."""
        ref = self.ref.sibling(manifest.session_id)
        return self.host.label_at(ref) or untitled(self.host.title_at(ref))

    def _open_branch(self, session_id: str) -> None:
        """A branch listed at a turn opens where it differs: its first own turn."""
        manifest = self._lineage.by_id.get(session_id)
        link = manifest.parent if manifest is not None else None
        if self._on_open_at is None or link is None or link.kind != "fork":
            self._on_open(session_id)
            return
        self._on_open_at(session_id, TurnTarget.following(link.turn_id))

    def _switch(self, session_id: str, after_turn_id: str | None) -> None:
        if self._on_switch is not None:
            self._on_switch(session_id, after_turn_id)

    # -- building widgets --------------------------------------------------------

    def compare_with(self, other_ids: Sequence[str]) -> None:
        """Show this conversation beside one to three of its branches (a turn's branch menu).

        Opens at the first turn after the split (where the branches differ).
        """
        refs = [self.ref, *(self.ref.sibling(sid) for sid in other_ids)]
        show_compare(self.host, refs, self, self._compared)

    def _load_previews(
        self,
        refs: tuple[AttachmentRef, ...],
        done: Callable[[Mapping[str, Preview]], None],
    ) -> None:
        """Ask the host for attachments' previews (read off the UI thread), then show them."""

        async def load() -> None:
            previews = await self.host.previews_at(self.ref, refs)
            if shiboken6.isValid(self):
                done(previews)

        self.host.spawn(load(), "show attachments")

    def _compared(self, view: CompareView) -> None:
        self.compare_view = view

    def _fused_source_name(self, source: FusedSource) -> str:
        """A fused card's source: its branch label ("qwen2.5 · sample 2"), else its model."""
        return self.host.label_at(self.ref.sibling(source.session_id)) or source.model

    def _make(self, row: Row) -> TurnWidget:
        widget = TurnWidget(
            row,
            self._on_branch,
            self._open_branch,
            self.widget(),
            self._ask_again,
            title_of=lambda sid: self.host.title_at(self.ref.sibling(sid)),
            on_compare=None if self.ref.remote else self.compare_with,
            compare_refusal=self._refusal("compare"),
            on_switch=self._switch,
            on_open_at=self._on_open_at,
            label_of=self._label_of,
            name_of=self._fused_source_name,
            previews=self._load_previews,
        )
        widget.set_branch_state(self.host.branch_state_at(self.ref, row))
        self._widgets[row.row_id] = widget
        return widget

    @property
    def _ask_again(self) -> AskAgain:
        """Edit and Regenerate open a branch in a new tab; Retry runs here.

        What the conversation's source cannot do now is disabled, with why.
        """
        host, ref = self.host, self.ref
        return AskAgain(
            edit=lambda turn, text: host.spawn(host.edit_at(ref, turn, text), "edit as a branch"),
            regenerate=lambda turn: host.spawn(host.regenerate_at(ref, turn), "regenerate"),
            retry=lambda turn: host.spawn(host.retry_at(ref, turn), "retry"),
            refusal=self._refusal,
        )

    def _refusal(self, action: str) -> str | None:
        code = self.host.refusal(self.ref, "edit" if action == "regenerate" else action)
        return refusal_text(self.host, self.ref, code) if code is not None else None

    def _insert(self, position: int, widget: TurnWidget) -> None:
        """Put a widget in the layout in row order (1 skips the "earlier" button)."""
        index = bisect.bisect_left(self._positions, position)
        self._positions.insert(index, position)
        self._layout.insertWidget(1 + index, widget)

    def _drop(self, row_id: str) -> None:
        widget = self._widgets.pop(row_id)
        self._layout.removeWidget(widget)
        widget.hide()
        widget.deleteLater()

    def _build_missing(self, limit: int) -> int:
        """Build up to ``limit`` missing widgets of the window, bottom-up; return how many."""
        rows = self._rows()
        built = 0
        with_branches: set[str] | None = None
        alternatives: dict[str, Alternatives] = {}
        # A conversation closed under a tab on its way out has no rows left to build.
        end = min(self._window.end, len(rows))
        for position in range(end - 1, self._window.start - 1, -1):
            if built >= limit:
                break
            row = rows[position]
            if row.row_id in self._widgets:
                continue
            if with_branches is None:
                with_branches = self._lineage.turns_with_branches(self.session_id)
                alternatives = self.host.alternatives_at(self.ref)
            widget = self._make(row)
            self._show_branches(widget, with_branches, alternatives)
            if not self._stick and self._keep_bottom_distance is None:
                bar = self.verticalScrollBar()
                self._keep_bottom_distance = bar.maximum() - bar.value()
            self._insert(position, widget)
            built += 1
        return built

    def _schedule_fill(self) -> None:
        if not self._filling and not self.complete:
            self._filling = True
            QTimer.singleShot(0, self, self._fill_step)

    def _fill_step(self) -> None:
        self._filling = False
        if self._build_missing(FILL_ROWS):
            self._schedule_fill()

    # -- paging ----------------------------------------------------------------

    def load_earlier(self) -> int:
        """Extend the window by the previous page; returns how many rows it added.

        Rows the conversation does not hold yet (a server's, opened on its last
        page) are asked of the host; the window grows when they arrive.
        """
        if self._window.start == 0:
            if self._unread_turns() and not self._earlier_asked:
                self._earlier_asked = True
                self.host.spawn(self._ask_earlier(), "load earlier turns")
            return 0
        earlier = self._window.earlier(self.page_size)
        added = self._window.start - earlier.start
        self._window = earlier
        self._update_earlier_button()
        self._stick = False
        self._schedule_fill()
        return added

    async def _ask_earlier(self) -> None:
        changes = await self.host.load_earlier(self.ref, initiator=self)
        if not changes.transcripts and shiboken6.isValid(self):
            self._earlier_asked = False  # refused (a notice says why): scrolling up asks again

    def _unread_turns(self) -> int:
        conversation = self.host.conversation(self.ref)
        return conversation.earlier_turns if conversation is not None else 0

    def _update_earlier_button(self) -> None:
        hidden = self._window.start + self._unread_turns()
        self.earlier_button.setVisible(hidden > 0)
        self.earlier_button.setText(
            fill(_("Show earlier turns ({n} more)"), {"n": format_number(hidden)})
        )

    def _scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._stick = value >= bar.maximum() - STICK_SLACK
        at_top = value == bar.minimum() and bar.maximum() > 0
        more = self._window.start > 0 or (self._unread_turns() > 0 and not self._earlier_asked)
        if at_top and self._pinned is None and more and not self._loading_earlier:
            self._loading_earlier = True
            QTimer.singleShot(0, self, self._load_earlier_from_scroll)

    def _load_earlier_from_scroll(self) -> None:
        self._loading_earlier = False
        self.load_earlier()

    def _range_changed(self, _minimum: int, maximum: int) -> None:
        if self._pinned is not None:
            self._keep_bottom_distance = None
            self._keep_pinned_in_view()
        elif self._stick:
            self._scroll_to_bottom()
        elif self._keep_bottom_distance is not None:
            # Rows were built above the reader: keep what they read in place.
            distance, self._keep_bottom_distance = self._keep_bottom_distance, None
            self.verticalScrollBar().setValue(maximum - distance)

    def _scroll_to_bottom(self) -> None:
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    def retranslate_ui(self) -> None:
        """Re-render every localized text."""
        self._update_earlier_button()
        for widget in self._widgets.values():
            widget.retranslate_ui()


def refusal_text(host: Host, ref: ConversationRef, code: str) -> str:
    """A refusal's reason in the user's words, naming the conversation's server."""
    server = host.server_of(ref)
    return reason_text(code, server=server.name if server is not None else str(ref.server))
