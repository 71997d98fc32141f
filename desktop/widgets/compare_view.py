"""Compare two to four conversations of one tree side by side, from where they split.

One column per conversation, one row per position after the split, so turn
N of one stays beside turn N of the others and every column scrolls with
the rest (one scroll area holds them all). Each turn is numbered as its own
transcript numbers it and rendered with the transcript's renderer (tables,
highlighted code). Where answers differ, the words one column has and the
first column does not are on a tint (:mod:`compare_marks`); a row where every
answer is the same shows "Same answer", expandable. Rows are built a few at
a time as the view scrolls, so a long comparison paints at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import shiboken6
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QPalette, QResizeEvent
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.conversation.compare import SideTurn
from branchwise.core.conversation.names import display_title
from branchwise.core.conversation.word_diff import Range, against_first
from branchwise.core.i18n.language import (
    _,
    add_language_listener,
    format_number,
    remove_language_listener,
)
from branchwise.core.i18n.reasons import fill
from branchwise.desktop.host.compare_rows import CompareRow
from branchwise.desktop.host.conversation import ConversationRef
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.operations import Compared
from branchwise.desktop.widgets.compare_marks import mark_blocks, visible_text
from branchwise.desktop.widgets.markdown_blocks import Block
from branchwise.desktop.widgets.markdown_view import MarkdownView
from branchwise.desktop.widgets.theme import theme_colors
from branchwise.desktop.widgets.turn_widget import untitled

SESSION_ROLE = Qt.ItemDataRole.UserRole
#: Rows built before the view first paints (more follow at once if they do not fill it).
FIRST_ROWS = 3
#: Rows built per event-loop turn after that, while the view is near their place.
FILL_ROWS = 4
#: Viewports of built rows kept below what is shown.
AHEAD = 2
#: How long a row opened at stays pinned in view while the rows above it lay out.
PIN_MS = 1500


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


class AnswerView(MarkdownView):
    """An answer rendered as the transcript renders it, its differing words on a tint.

    The tint is the theme's highlight paired with the palette's text colour,
    so it reads in the light and the dark theme; a theme change re-renders
    it (``MarkdownView.changeEvent``). What is marked is also the view's
    accessible description and :meth:`changed_spans`.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("compareAnswer")
        self._ranges: tuple[Range, ...] = ()

    def load(self, text: str) -> str:
        """Parse ``text`` without showing it; returns the text a reader will see."""
        self._markdown.update(text)
        return visible_text(self._markdown.blocks)

    def show_marked(self, ranges: Sequence[Range]) -> None:
        """Show the loaded answer with ``ranges`` of its visible text marked."""
        self._ranges = tuple(ranges)
        self._show_from(0)
        self.retranslate_ui()

    def _blocks(self) -> list[Block]:
        if not self._ranges:
            return self._markdown.blocks
        palette = self.palette()
        return mark_blocks(
            self._markdown.blocks,
            self._ranges,
            theme_colors(palette).search_hit,
            palette.color(QPalette.ColorRole.Text).name(),
        )

    def changed_spans(self) -> list[str]:
        """The marked pieces of the answer, as the reader sees them."""
        text = visible_text(self._markdown.blocks)
        return [text[start:end] for start, end in self._ranges]

    def retranslate_ui(self) -> None:
        """Code block labels, and the differing words as the accessible description."""
        super().retranslate_ui()
        spans = self.changed_spans()
        self.setAccessibleDescription(
            # TRANSLATORS: read by screen readers; {words} lists the differing words.
            fill(_("Differs in: {words}"), {"words": " · ".join(spans)}) if spans else ""
        )


class CompareCell(QFrame):
    """One conversation's turn at one row: its number, prompt and answer.

    ``turn`` is ``None`` when that conversation has no turn at this position.
    """

    def __init__(
        self, turn: SideTurn | None, row: CompareRow, parent: QWidget, same: bool = False
    ) -> None:
        super().__init__(parent)
        self.setObjectName("compareCell")
        self.turn = turn
        self.row = row
        self.same = same
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.setSpacing(4)
        self.number_label = QLabel(self)
        self.number_label.setObjectName("turnNumber")
        layout.addWidget(self.number_label)
        self.note = QLabel(self)
        self.note.setObjectName("compareNote")
        self.note.setWordWrap(True)
        layout.addWidget(self.note)
        self.prompt: MarkdownView | None = None
        self.answer: AnswerView | None = None
        self.same_answer_button: QToolButton | None = None
        if turn is not None:
            self.prompt = MarkdownView(self, breaks=True)
            self.prompt.setObjectName("userMessage")
            self.prompt.set_markdown(turn.prompt)
            layout.addWidget(self.prompt)
            self.answer = AnswerView(self)
            layout.addWidget(self.answer)
            if same:
                self.same_answer_button = QToolButton(self)
                self.same_answer_button.setObjectName("sameAnswerButton")
                self.same_answer_button.setCheckable(True)
                self.same_answer_button.setAutoRaise(True)
                self.same_answer_button.setToolButtonStyle(
                    Qt.ToolButtonStyle.ToolButtonTextBesideIcon
                )
                self.same_answer_button.toggled.connect(self._expand)
                layout.insertWidget(layout.indexOf(self.answer), self.same_answer_button)
                self.answer.hide()
        layout.addStretch(1)
        self.retranslate_ui()

    def _expand(self, shown: bool) -> None:
        assert self.answer is not None and self.turn is not None
        if shown and not self.answer.markdown:
            self.answer.set_markdown(self.turn.answer)
        self.answer.setVisible(shown)
        self._render_same_answer()

    def _render_same_answer(self) -> None:
        button = self.same_answer_button
        if button is None:
            return
        button.setArrowType(
            Qt.ArrowType.DownArrow if button.isChecked() else Qt.ArrowType.RightArrow
        )
        button.setText(_("Same answer"))
        if button.isChecked():
            button.setToolTip(_("Hide the answer"))
        elif self.row.same_answer:
            button.setToolTip(_("Every column answered the same"))
        else:
            button.setToolTip(_("The same answer as the first column"))

    def answer_text(self) -> str:
        """The answer as the reader sees it ("" while collapsed or missing)."""
        if self.answer is None or self.answer.isHidden():
            return ""
        return self.answer.text()

    def retranslate_ui(self) -> None:
        """Every text in the current language."""
        if self.turn is None:
            self.number_label.setText("")
            self.note.setText(_("No turn here."))
            return
        self.number_label.setText(fill(_("Turn {n}"), {"n": format_number(self.turn.number)}))
        self.note.setText(_("Same prompt") if self.row.same_prompt else "")
        self.note.setVisible(self.row.same_prompt)
        self._render_same_answer()
        if self.prompt is not None:
            self.prompt.retranslate_ui()
        if self.answer is not None:
            self.answer.retranslate_ui()


class CompareRowView(QFrame):
    """One position after the split: a cell per column, the differing words marked."""

    def __init__(self, row: CompareRow, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("compareRow")
        self.row = row
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        same = row.same_as_first or (False,) * len(row.turns)
        self.cells = [
            CompareCell(turn, row, self, collapsed)
            for turn, collapsed in zip(row.turns, same, strict=True)
        ]
        for cell in self.cells:
            layout.addWidget(cell, 1, Qt.AlignmentFlag.AlignTop)
        if row.same_answer:
            return
        # An answer the same as the first column's has nothing the first lacks.
        shown = [
            cell
            for cell in self.cells
            if cell.answer is not None and cell.turn is not None and not cell.same
        ]
        texts = [cell.answer.load(cell.turn.answer) for cell in shown if cell.answer and cell.turn]
        marks = against_first(texts) if len(texts) > 1 else [[] for _text in texts]
        for cell, ranges in zip(shown, marks, strict=True):
            assert cell.answer is not None
            cell.answer.show_marked(ranges)

    def retranslate_ui(self) -> None:
        """Every cell in the current language."""
        for cell in self.cells:
            cell.retranslate_ui()


class ElidedLabel(QLabel):
    """A one-line label that elides its text in the middle when it does not fit."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.full_text = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def set_full_text(self, text: str) -> None:
        """Show ``text``, elided to the width."""
        self.full_text = text
        self._elide()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        """Elide again for the new width."""
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        metrics = self.fontMetrics()
        super().setText(
            metrics.elidedText(self.full_text, Qt.TextElideMode.ElideMiddle, self.width())
        )


class ColumnHeader(QFrame):
    """A column's conversation: its title (elided in the middle) and its label (whole)."""

    def __init__(self, ref: ConversationRef, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("compareColumnHeader")
        self.ref = ref
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 0, 8, 0)
        layout.setSpacing(0)
        self.title = ElidedLabel(self)
        self.title.setObjectName("compareColumnTitle")
        self.title.setStyleSheet("font-weight: bold")
        self.label = QLabel(self)
        self.label.setObjectName("compareColumnLabel")
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setWordWrap(True)
        layout.addWidget(self.title)
        layout.addWidget(self.label)
        layout.addStretch(1)

    def show_conversation(self, host: Host) -> None:
        """Title, label and the branch's tooltip, in the active language."""
        title = untitled(display_title(host.title_at(self.ref)))
        self.title.set_full_text(title)
        label = host.label_at(self.ref) or ""
        self.label.setText(label)
        self.label.setVisible(bool(label))
        tip = host.branch_tooltip_at(self.ref)
        self.setToolTip(tip)
        self.title.setToolTip(tip)
        self.label.setToolTip(tip)
        self.setAccessibleName(f"{title} · {label}" if label else title)


class CompareView(QDialog):
    """Two to four conversations side by side from their split point.

    Args:
        compared: what the host's ``compare`` operation found.
        host: where each column's title, label and lineage are read (in the
            language shown, on every switch).
    """

    def __init__(self, compared: Compared, host: Host, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("compareView")
        # Palette roles, so the rule between rows follows the theme.
        self.setStyleSheet("QFrame#compareRow { border-bottom: 1px solid palette(midlight); }")
        self.compared = compared
        self.host = host
        self.resize(min(1600, 420 * len(compared.refs) + 140), 720)
        self.header = QLabel(self)
        self.header.setObjectName("compareHeader")
        self.header.setTextFormat(Qt.TextFormat.PlainText)
        heads = QHBoxLayout()
        heads.setSpacing(6)
        self.column_headers = [ColumnHeader(ref, self) for ref in compared.refs]
        for header in self.column_headers:
            heads.addWidget(header, 1)
        self.rows_area = QScrollArea(self)
        self.rows_area.setObjectName("compareRows")
        self.rows_area.setWidgetResizable(True)
        self.rows_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.rows_area.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        heads.setContentsMargins(0, 0, self.rows_area.verticalScrollBar().sizeHint().width(), 0)
        body = QWidget(self.rows_area)
        body.setObjectName("compareBody")
        body.setMinimumHeight(1)
        self._rows_layout = QVBoxLayout(body)
        self._rows_layout.setContentsMargins(0, 0, 0, 0)
        self._rows_layout.setSpacing(2)
        self.empty = QLabel(body)
        self.empty.setObjectName("compareEmpty")
        self._rows_layout.addWidget(self.empty)
        self.empty.setVisible(not compared.rows)
        self._rows_layout.addStretch(1)
        self.rows_area.setWidget(body)
        self._body = body
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addLayout(heads)
        layout.addWidget(self.rows_area, 1)
        layout.addWidget(buttons)
        self.row_views: list[CompareRowView] = []
        self._fill_timer = QTimer(self)
        self._fill_timer.setSingleShot(True)
        self._fill_timer.setInterval(0)
        self._fill_timer.timeout.connect(self._fill)
        bar = self.rows_area.verticalScrollBar()
        bar.valueChanged.connect(self._scrolled)
        bar.rangeChanged.connect(self._range_changed)
        self._pinned: int | None = None
        self._unpin = QTimer(self)
        self._unpin.setSingleShot(True)
        self._unpin.setInterval(PIN_MS)
        self._unpin.timeout.connect(lambda: setattr(self, "_pinned", None))
        self.retranslate_ui()
        target = self._row_of_turn(compared.at_turn)
        self.build_rows(max(FIRST_ROWS, target + 1))
        if target > 0:
            QTimer.singleShot(0, lambda: self.scroll_to_row(target))
        self._fill_timer.start()
        add_language_listener(self._language_changed)

    # -- rows ------------------------------------------------------------------

    def _row_of_turn(self, number: int | None) -> int:
        """The index of the row where a column's turn has ``number`` (0 when none does)."""
        if number is None:
            return 0
        for index, row in enumerate(self.compared.rows):
            if number in row.numbers:
                return index
        return 0

    def build_rows(self, count: int) -> None:
        """Build the rows up to ``count`` (in order; built ones stay)."""
        rows = self.compared.rows
        while len(self.row_views) < min(count, len(rows)):
            view = CompareRowView(rows[len(self.row_views)], self._body)
            self._rows_layout.insertWidget(len(self.row_views), view)
            self.row_views.append(view)

    def _fill(self) -> None:
        """Build more rows while what is built does not reach far enough below the view."""
        if not shiboken6.isValid(self) or len(self.row_views) >= len(self.compared.rows):
            return
        bar = self.rows_area.verticalScrollBar()
        reach = self.rows_area.viewport().height() * AHEAD
        built_end = self.row_views[-1].geometry().bottom() if self.row_views else 0
        if built_end - bar.value() < reach + self.rows_area.viewport().height():
            self.build_rows(len(self.row_views) + FILL_ROWS)
            self._fill_timer.start()

    def scroll_to_row(self, index: int) -> None:
        """Bring row ``index`` to the top of the view (built first if need be).

        The row stays pinned there a moment while the rows above it settle.
        """
        if not shiboken6.isValid(self) or not self.compared.rows:
            return
        self.build_rows(index + 1)
        self._pinned = index
        self._unpin.start()
        self.rows_area.verticalScrollBar().setValue(self.row_views[index].y())

    def _scrolled(self, value: int) -> None:
        bar = self.rows_area.verticalScrollBar()
        pinned = self._pinned
        if pinned is not None and value not in (self.row_views[pinned].y(), bar.maximum()):
            self._pinned = None  # scrolled away from the row: it is the reader's view now
        self._fill_timer.start()

    def _range_changed(self, _low: int, _high: int) -> None:
        if self._pinned is not None:
            self.rows_area.verticalScrollBar().setValue(self.row_views[self._pinned].y())
        self._fill_timer.start()

    def column_titles(self) -> list[str]:
        """Each column's conversation title, whole (the header may elide it)."""
        return [header.title.full_text for header in self.column_headers]

    def column_labels(self) -> list[str]:
        """Each column's branch label ("" for a conversation that is not a branch)."""
        return [header.label.text() for header in self.column_headers]

    def cells(self, column: int) -> list[CompareCell]:
        """The built cells of one column, top to bottom."""
        return [view.cells[column] for view in self.row_views]

    # -- language --------------------------------------------------------------

    def _language_changed(self, _code: str) -> None:
        if not shiboken6.isValid(self):
            remove_language_listener(self._language_changed)
            return
        self.retranslate_ui()

    def retranslate_ui(self) -> None:
        """Every text in the current language."""
        self.setWindowTitle(_("Compare conversations"))
        compared = self.compared
        if compared.shared_turns:
            header = fill(
                # TRANSLATORS: {turn} is a turn number, {title} a conversation's title.
                _("Split after turn {turn} of {title}"),
                {
                    "turn": format_number(compared.shared_turns),
                    "title": untitled(display_title(compared.common_title)),
                },
            )
        else:
            header = fill(
                _("Split at the start of {title}"),
                {"title": untitled(display_title(compared.common_title))},
            )
        self.header.setText(header)
        for column in self.column_headers:
            column.show_conversation(self.host)
        self.empty.setText(_("No turns after the split."))
        for view in self.row_views:
            view.retranslate_ui()

    def done(self, result: int) -> None:
        """Close, and stop following the language."""
        remove_language_listener(self._language_changed)
        super().done(result)


def show_compare(
    host: Host,
    refs: Sequence[ConversationRef],
    parent: QWidget,
    shown: Callable[[CompareView], None],
    at_turn: int | None = None,
) -> None:
    """Ask the host to compare two to four conversations; ``shown`` gets the opened view.

    ``at_turn``: the turn number (as the transcripts number it) to open at.
    The logs are read and the rows aligned off the UI thread; a refusal is
    the host's notice.
    """

    async def ask() -> None:
        compared = await host.operations.compare(refs, at_turn)
        if compared is None or not shiboken6.isValid(parent):
            return
        view = CompareView(compared, host, parent)
        view.show()
        shown(view)

    host.spawn(ask(), "compare conversations")


def show_comparison(
    host: Host,
    session_id: str,
    other_id: str,
    parent: QWidget,
    shown: Callable[[CompareView], None],
) -> None:
    """Compare two conversations of this machine (the sidebar's "Compare with…")."""
    show_compare(host, [ConversationRef(session_id), ConversationRef(other_id)], parent, shown)
