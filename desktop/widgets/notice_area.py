"""Where notices show: the latest few as rows, every one in a history menu.

Failures never disappear on their own: errors and warnings stay until the
user dismisses them, while outcomes ("Branch created: …") fade after a few
seconds. An Undo (of a deletion) shows on top and stays until it is used,
dismissed, or replaced by a newer Undo once it has shown for
:data:`UNDO_MIN_MS`. A notice identical to one already shown (same code, level, words,
detail and action) does not stack up as another row: the row counts it
("×3") and starts its fade again. However long the rows' texts, the area
never takes more than :data:`MAX_SHARE` of the window's height; beyond that
its rows scroll. Each row names its failure in the user's language (the notice
carries a code and parameters, not finished text, so a language switch
re-renders it) and shows the untranslated technical detail beneath.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QElapsedTimer, QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPushButton,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.i18n.language import _, format_number, format_time, ngettext
from branchwise.core.i18n.reasons import fill, reason_text
from branchwise.desktop.host.notices import Level, Notice, NoticeAction, NoticeCenter
from branchwise.desktop.host.trashing import RESTORE_ACTION
from branchwise.desktop.widgets.turn_widget import untitled

#: How many notices show as rows at once.
MAX_ROWS = 3
#: How long an outcome (info, success) stays before it fades into the history.
OUTCOME_MS = 8000
PERSISTENT = (Level.ERROR, Level.WARNING)
#: The largest share of the window's height the notice rows may take.
MAX_SHARE = 0.25
#: Actions done once: their row leaves when clicked (an Undo, "Use it" for an offered server).
ONCE_ACTIONS = frozenset({RESTORE_ACTION, "use_server"})
#: An Undo shows at least this long before a newer Undo may replace it (it never fades).
UNDO_MIN_MS = 15_000


def is_undo(notice: Notice) -> bool:
    """The notice offers to undo what was just done (a deletion): it stays on top until used."""
    return notice.action is not None and notice.action.kind == RESTORE_ACTION


def same_notice(a: Notice, b: Notice) -> bool:
    """``a`` and ``b`` say the same thing (they differ at most in id and time)."""
    return (a.code, a.level, a.params, a.detail, a.action, a.sticky) == (
        b.code,
        b.level,
        b.params,
        b.detail,
        b.action,
        b.sticky,
    )


def notice_text(notice: Notice, title_of: Callable[[str], str]) -> str:
    """The notice's sentence in the active language.

    Notices that name a session by id (``child``) get its title filled in; a
    notice about one conversation (a turn that failed) starts with its title,
    so with several tabs open the person knows which one it is.
    """
    params = dict(notice.params)
    child = params.get("child")
    if "title" not in params and isinstance(child, str):
        params["title"] = untitled(title_of(child))
    elif "title" in params and isinstance(params["title"], str):
        params["title"] = untitled(params["title"])
    text = reason_text(notice.code, **params)
    if notice.subject is None:
        return text
    title = title_of(notice.subject.session_id) or str(notice.params.get("title") or "")
    return fill(_("{conversation}: {message}"), {"conversation": untitled(title), "message": text})


class NoticeRow(QFrame):
    """One visible notice with its action and a dismiss button."""

    def __init__(self, area: NoticeArea, notice: Notice) -> None:
        super().__init__(area)
        self.notice = notice
        self.count = 1
        self._area = area
        self._fade: QTimer | None = None
        self.setObjectName("noticeRow")
        self.setProperty("level", str(notice.level))
        self.message_label = QLabel(self)
        self.message_label.setObjectName("noticeText")
        self.message_label.setWordWrap(True)
        self.message_label.setTextFormat(Qt.TextFormat.PlainText)
        self.message_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.detail_label = QLabel(self)
        self.detail_label.setObjectName("noticeDetail")
        self.detail_label.setWordWrap(True)
        self.detail_label.setTextFormat(Qt.TextFormat.PlainText)
        self.detail_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.count_label = QLabel(self)
        self.count_label.setObjectName("noticeCount")
        self.count_label.setTextFormat(Qt.TextFormat.PlainText)
        self.count_label.hide()
        self.action_button = QPushButton(self)
        self.action_button.setObjectName("noticeAction")
        self.action_button.clicked.connect(self._act)
        self.dismiss_button = QToolButton(self)
        self.dismiss_button.setObjectName("noticeDismiss")
        self.dismiss_button.setText("×")
        self.dismiss_button.setAutoRaise(True)
        self.dismiss_button.clicked.connect(lambda: area.decline(self))
        texts = QVBoxLayout()
        texts.setSpacing(0)
        texts.addWidget(self.message_label)
        texts.addWidget(self.detail_label)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 4, 4, 4)
        layout.addLayout(texts, 1)
        layout.addWidget(self.count_label, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(self.action_button)
        layout.addWidget(self.dismiss_button, 0, Qt.AlignmentFlag.AlignTop)
        self.shown = QElapsedTimer()
        self.shown.start()
        if notice.level not in PERSISTENT and not notice.sticky and not is_undo(notice):
            # Owned by the row, so it dies with it and never fires on a deleted one.
            self._fade = QTimer(self)
            self._fade.setSingleShot(True)
            self._fade.timeout.connect(lambda: area.dismiss(self))
            self._fade.start(OUTCOME_MS)
        self.retranslate_ui()

    @property
    def text(self) -> str:
        """The sentence shown."""
        return self.message_label.text()

    def repeat(self, notice: Notice) -> None:
        """The same notice came again: count it, act on the newest, fade from now."""
        self.notice = notice
        self.count += 1
        if self._fade is not None:
            self._fade.start(OUTCOME_MS)
        self.retranslate_ui()

    def _act(self) -> None:
        action = self.notice.action
        if action is None:
            return
        if action.kind in ONCE_ACTIONS:
            self._area.dismiss(self)
        self._area.run_action(action)

    def retranslate_ui(self) -> None:
        """Re-render the sentence in the active language."""
        self.message_label.setText(notice_text(self.notice, self._area.title_of))
        detail = self.notice.detail or ""
        self.detail_label.setText(detail)
        self.detail_label.setVisible(bool(detail))
        action = self.notice.action
        self.action_button.setVisible(action is not None)
        if action is not None and action.kind == "use_server":
            self.action_button.setText(_("Use it"))
            self.action_button.setToolTip(_("Switch to this model server"))
        elif action is not None and action.kind == RESTORE_ACTION:
            self.action_button.setText(_("Undo"))
            self.action_button.setToolTip(_("Move the conversation back from the Trash"))
        elif action is not None:
            self.action_button.setText(_("Open"))
            self.action_button.setToolTip(_("Open the conversation this notice is about"))
        self.dismiss_button.setToolTip(_("Dismiss"))
        self.dismiss_button.setAccessibleName(_("Dismiss"))
        self.count_label.setVisible(self.count > 1)
        if self.count > 1:
            # A sign and a number: the same in every language (the digits are localized).
            self.count_label.setText("×" + format_number(self.count))
            times = fill(
                ngettext("Happened {n} time", "Happened {n} times", self.count),
                {"n": format_number(self.count)},
            )
            self.count_label.setToolTip(times)
            self.count_label.setAccessibleName(times)


class NoticeArea(QFrame):
    """The notice rows and the history button.

    Args:
        notices: the notice channel to listen to.
        title_of: a session's title, for notices that name a session by id.
        on_action: runs a notice's action (e.g. opens a kept child).
        on_decline: told when the user dismisses a row by hand (an offer declined).
    """

    def __init__(
        self,
        notices: NoticeCenter,
        title_of: Callable[[str], str],
        on_action: Callable[[NoticeAction], None],
        parent: QWidget | None = None,
        on_decline: Callable[[Notice], None] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("noticeArea")
        self.notices = notices
        self.title_of = title_of
        self._on_action = on_action
        self._on_decline = on_decline
        self._rows_box = QWidget(self)
        self._rows_box.setObjectName("noticeRows")
        self._rows_layout = QVBoxLayout(self._rows_box)
        self._rows_layout.setContentsMargins(0, 0, 0, 0)
        self._rows_layout.setSpacing(2)
        self.rows_scroll = QScrollArea(self)
        self.rows_scroll.setObjectName("noticeScroll")
        self.rows_scroll.setWidgetResizable(True)
        self.rows_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.rows_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.rows_scroll.setWidget(self._rows_box)
        self._watched: QWidget | None = None
        self.history_button = QToolButton(self)
        self.history_button.setObjectName("noticeHistory")
        self.history_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.history_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.history_button.setAutoRaise(True)
        self.history_menu = QMenu(self.history_button)
        self.history_menu.aboutToShow.connect(self._fill_history)
        self.history_button.setMenu(self.history_menu)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 2)
        layout.addWidget(self.rows_scroll, 1)
        layout.addWidget(
            self.history_button, 0, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignBottom
        )
        self._unsubscribe = notices.subscribe(self.show_notice)
        self._unsubscribe_withdrawn = notices.subscribe_withdrawn(self._withdrawn)
        for notice in notices.history:
            if notice.level in PERSISTENT or notice.sticky:
                self.show_notice(notice)
        self.retranslate_ui()

    # -- what the UI exposes -------------------------------------------------

    def rows(self) -> list[NoticeRow]:
        """The visible notice rows, oldest first."""
        found = []
        for position in range(self._rows_layout.count()):
            item = self._rows_layout.itemAt(position)
            widget = item.widget() if item is not None else None
            if isinstance(widget, NoticeRow):
                found.append(widget)
        return found

    def visible_texts(self) -> list[str]:
        """The sentences shown right now, oldest first."""
        return [row.text for row in self.rows()]

    def history_texts(self) -> list[str]:
        """Every kept notice's sentence, newest first."""
        return [notice_text(n, self.title_of) for n in reversed(self.notices.history)]

    # -- showing ---------------------------------------------------------------

    def show_notice(self, notice: Notice) -> None:
        """Add a row for ``notice``, or count it on the row already saying the same.

        The oldest outcome makes room first when :data:`MAX_ROWS` are shown.
        """
        rows = self.rows()
        if any(row.notice.id == notice.id for row in rows):
            return
        same = next((row for row in rows if same_notice(row.notice, notice)), None)
        if same is not None:
            same.repeat(notice)
        elif is_undo(notice):
            # A newer Undo replaces one shown long enough; a younger one stays below it.
            for old in [r for r in rows if is_undo(r.notice)]:
                if old.shown.elapsed() >= UNDO_MIN_MS:
                    rows.remove(old)
                    self._remove(old)
            self._make_room(rows)
            self._rows_layout.insertWidget(0, NoticeRow(self, notice))
        else:
            self._make_room(rows)
            self._rows_layout.addWidget(NoticeRow(self, notice))
        self._render_history_button()
        self._fit()

    def _make_room(self, rows: list[NoticeRow]) -> None:
        """Below :data:`MAX_ROWS`: outcomes go first, then failures, an Undo last."""
        while len(rows) >= MAX_ROWS:
            victim = next(
                (r for r in rows if r.notice.level not in PERSISTENT and not is_undo(r.notice)),
                None,
            ) or next((r for r in rows if not is_undo(r.notice)), rows[-1])
            rows.remove(victim)
            self._remove(victim)

    # -- size ------------------------------------------------------------------

    def height_cap(self) -> int:
        """The most height the rows may take: :data:`MAX_SHARE` of the window's."""
        window = self.window()
        if window is self:
            return 10**6
        return max(0, int(window.height() * MAX_SHARE))

    def _fit(self) -> None:
        """Size the rows to their text, up to the cap (they scroll beyond it)."""
        window = self.window()
        if window is not self and window is not self._watched:
            if self._watched is not None:
                self._watched.removeEventFilter(self)
            window.installEventFilter(self)
            self._watched = window
        has_rows = bool(self.rows())
        self.rows_scroll.setVisible(has_rows)
        if not has_rows:
            self.rows_scroll.setFixedHeight(0)
            return
        layout = self._rows_layout
        width = self.rows_scroll.viewport().width()
        wanted = (
            layout.totalHeightForWidth(width)
            if layout.hasHeightForWidth() and width > 0
            else layout.totalSizeHint().height()
        )
        self.rows_scroll.setFixedHeight(min(wanted, self.height_cap()))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        """The window was resized: fit the rows to its new height."""
        if watched is self._watched and event.type() == QEvent.Type.Resize:
            self._fit()
        return False

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        """A new width wraps the rows' text differently."""
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            QTimer.singleShot(0, self, self._fit)

    def dismiss(self, row: NoticeRow) -> None:
        """Hide a row (the notice stays in the history)."""
        if row in self.rows():
            self._remove(row)
        self._render_history_button()
        self._fit()

    def decline(self, row: NoticeRow) -> None:
        """The user dismissed ``row``: hide it and tell whoever made the offer."""
        self.dismiss(row)
        if self._on_decline is not None:
            self._on_decline(row.notice)

    def _withdrawn(self, notice: Notice) -> None:
        for row in self.rows():
            if row.notice.id == notice.id:
                self.dismiss(row)

    def _remove(self, row: NoticeRow) -> None:
        self._rows_layout.removeWidget(row)
        row.hide()
        row.deleteLater()

    def run_action(self, action: NoticeAction) -> None:
        """Run a notice's action."""
        self._on_action(action)

    def _fill_history(self) -> None:
        self.history_menu.clear()
        history = list(reversed(self.notices.history))
        if not history:
            empty = self.history_menu.addAction(_("No notices yet"))
            empty.setEnabled(False)
            return
        for notice in history:
            text = notice_text(notice, self.title_of)
            when = format_time(notice.created) if notice.created else ""
            action = self.history_menu.addAction(f"{when}  {text}" if when else text)
            if notice.detail:
                action.setToolTip(notice.detail)
            action.triggered.connect(lambda _checked=False, n=notice: self.show_notice(n))

    def _render_history_button(self) -> None:
        count = len(self.notices.history)
        label = _("Notices")
        self.history_button.setText(
            fill(_("{label} ({n})"), {"label": label, "n": count}) if count else label
        )
        self.history_button.setToolTip(_("Show recent notices"))
        self.history_button.setAccessibleName(label)

    def retranslate_ui(self) -> None:
        """Re-render every localized text."""
        for row in self.rows():
            row.retranslate_ui()
        self._render_history_button()
        self._fit()

    def close_area(self) -> None:
        """Stop listening to the notice channel."""
        self._unsubscribe()
        self._unsubscribe_withdrawn()
