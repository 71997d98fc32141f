"""The transcript of one conversation: a paged list of turn widgets.

Only a window of rows has widgets — the last page when a conversation opens,
extended a page at a time when the user scrolls to the top (or clicks "Show
earlier turns") — so a 10,000-turn conversation opens with about fifty turn
widgets, and every visible turn still has a real, findable branch button.

The view follows the bottom while an answer streams, unless the user has
scrolled away to read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QFrame, QPushButton, QScrollArea, QVBoxLayout, QWidget

from branchwise.core.i18n import _, format_number
from branchwise.core.reasons import fill

from .host import Host
from .transcript_model import PAGE_SIZE, BranchTarget, Row, Window
from .turn_widget import TurnWidget

#: Pixels from the bottom that still count as "at the bottom".
STICK_SLACK = 24


class TranscriptView(QScrollArea):
    """Turn widgets for a window of a session's rows.

    Args:
        host: the host (rows, branch states and branches come from it).
        session_id: the conversation shown.
        on_branch: a branch action was clicked.
        on_open: a listed branch should be opened.
        page_size: rows per page.
    """

    def __init__(
        self,
        host: Host,
        session_id: str,
        on_branch: Callable[[BranchTarget], None],
        on_open: Callable[[str], None],
        page_size: int = PAGE_SIZE,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("transcript")
        self.host = host
        self.session_id = session_id
        self.page_size = page_size
        self._on_branch = on_branch
        self._on_open = on_open
        self._window = Window(0, 0)
        self._widgets: dict[str, TurnWidget] = {}
        self._stick = True
        self._loading_earlier = False

        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget(self)
        body.setObjectName("transcriptBody")
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
        self.retranslate_ui()
        self.reload()

    # -- what the UI exposes -------------------------------------------------

    def turn_widgets(self) -> list[TurnWidget]:
        """The turn widgets in display order."""
        return [w for w in self._ordered() if w is not None]

    def _ordered(self) -> Iterable[TurnWidget | None]:
        for position in range(self._layout.count()):
            widget = self._layout.itemAt(position).widget()
            if isinstance(widget, TurnWidget):
                yield widget

    def widget_for(self, row_id: str) -> TurnWidget | None:
        """The widget of one row, if it is in the window."""
        return self._widgets.get(row_id)

    @property
    def window_rows(self) -> Window:
        """Which rows have widgets."""
        return self._window

    # -- refreshing ------------------------------------------------------------

    def reload(self) -> None:
        """Show the last page of the session's rows (after opening or a full re-read)."""
        session = self.host.session(self.session_id)
        rows = session.rows if session is not None else []
        window = Window.tail(len(rows), self.page_size)
        if self._window.size and self._window.end <= len(rows):
            # Keep what the user paged in, re-aligned to the new rows.
            window = Window(min(window.start, max(0, len(rows) - self._window.size)), len(rows))
        self._window = window
        wanted = rows[window.start : window.end]
        wanted_ids = {row.row_id for row in wanted}
        for row_id in [r for r in self._widgets if r not in wanted_ids]:
            gone = self._widgets.pop(row_id)
            self._layout.removeWidget(gone)
            gone.hide()
            gone.deleteLater()
        for offset, row in enumerate(wanted):
            widget = self._widgets.get(row.row_id)
            if widget is None:
                widget = self._make(row)
            else:
                if widget.row != row:
                    widget.set_row(row)
                if self._layout.indexOf(widget) == 1 + offset:
                    continue
                # Re-inserting a widget that is still in the layout would leave a
                # second layout item pointing at it; take it out first.
                self._layout.removeWidget(widget)
            self._layout.insertWidget(1 + offset, widget)
        self.refresh_branch_states()
        self.refresh_branches()
        self._update_earlier_button()
        self._stick = True
        self._scroll_to_bottom()

    def update_turns(self, turn_ids: Iterable[str]) -> None:
        """Refresh changed turns; a new trailing turn gets a widget."""
        session = self.host.session(self.session_id)
        if session is None:
            return
        for turn_id in turn_ids:
            row = session.row(turn_id)
            if row is None:
                continue
            widget = self._widgets.get(turn_id)
            if widget is not None:
                widget.set_row(row)
                widget.set_branch_state(self.host.branch_state(self.session_id, row))
            elif self._window.end == len(session.rows) - 1:
                self._window = Window(self._window.start, self._window.end + 1)
                widget = self._make(row)
                self._layout.insertWidget(self._layout.count() - 1, widget)

    def append_text(self, turn_id: str, message_id: str, chunk: str) -> None:
        """Streamed text of a running turn."""
        widget = self._widgets.get(turn_id)
        if widget is not None:
            widget.append_text(message_id, chunk)

    def refresh_branch_states(self) -> None:
        """Recompute every visible branch action (targets or host state changed)."""
        for widget in self._widgets.values():
            widget.set_branch_state(self.host.branch_state(self.session_id, widget.row))

    def refresh_branches(self) -> None:
        """Re-list the branches of every visible turn (a child was created)."""
        index = self.host.index
        with_branches = index.turns_with_branches(self.session_id)
        for widget in self._widgets.values():
            turn_id = widget.row.turn_id
            if turn_id in with_branches:
                widget.set_branches(index.branches_at(self.session_id, turn_id))
            else:
                widget.set_branches(())

    def _make(self, row: Row) -> TurnWidget:
        widget = TurnWidget(row, self._on_branch, self._on_open, self.widget())
        widget.set_branch_state(self.host.branch_state(self.session_id, row))
        self._widgets[row.row_id] = widget
        return widget

    # -- paging ----------------------------------------------------------------

    def load_earlier(self) -> int:
        """Give the previous page of rows widgets; returns how many were added."""
        session = self.host.session(self.session_id)
        if session is None or self._window.start == 0:
            return 0
        earlier = self._window.earlier(self.page_size)
        new_rows = session.rows[earlier.start : self._window.start]
        bar = self.verticalScrollBar()
        distance_from_bottom = bar.maximum() - bar.value()
        index = self.host.index
        with_branches = index.turns_with_branches(self.session_id)
        for offset, row in enumerate(new_rows):
            widget = self._make(row)
            if row.turn_id in with_branches:
                widget.set_branches(index.branches_at(self.session_id, row.turn_id))
            self._layout.insertWidget(1 + offset, widget)
        self._window = earlier
        self._update_earlier_button()
        # Keep the turn the user was reading in place once the new widgets are laid out.
        self._stick = False
        self.widget().adjustSize()
        QTimer.singleShot(0, self, lambda: bar.setValue(bar.maximum() - distance_from_bottom))
        return len(new_rows)

    def _update_earlier_button(self) -> None:
        hidden = self._window.start
        self.earlier_button.setVisible(hidden > 0)
        self.earlier_button.setText(
            fill(_("Show earlier turns ({n} more)"), {"n": format_number(hidden)})
        )

    def _scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._stick = value >= bar.maximum() - STICK_SLACK
        at_top = value == bar.minimum() and bar.maximum() > 0
        if at_top and self._window.start > 0 and not self._loading_earlier:
            self._loading_earlier = True
            QTimer.singleShot(0, self, self._load_earlier_from_scroll)

    def _load_earlier_from_scroll(self) -> None:
        self._loading_earlier = False
        self.load_earlier()

    def _range_changed(self, _minimum: int, _maximum: int) -> None:
        if self._stick:
            self._scroll_to_bottom()

    def _scroll_to_bottom(self) -> None:
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    def retranslate_ui(self) -> None:
        """Re-render every localized text."""
        self._update_earlier_button()
        for widget in self._widgets.values():
            widget.retranslate_ui()
