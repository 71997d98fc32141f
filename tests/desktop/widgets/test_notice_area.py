"""The notice area as seen: identical notices collapse with a count; it never eats the window."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from helpers.gui import WAIT_MS, App
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from branchwise.desktop.host.notices import Level, NoticeAction
from branchwise.desktop.host.trashing import RESTORE_ACTION
from branchwise.desktop.widgets import notice_area
from branchwise.desktop.widgets.notice_area import MAX_ROWS, MAX_SHARE


def test_identical_notices_collapse_into_one_row_with_a_count(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    area = app.window.notice_area
    for _ in range(5):
        app.host.notices.post("trash_emptied", Level.ERROR)
    qtbot.waitUntil(lambda: len(area.rows()) == 1, timeout=WAIT_MS)
    (row,) = area.rows()
    assert row.text == "The Trash was emptied."
    assert row.count_label.isVisible()
    assert row.count_label.text() == "×5"
    assert row.count_label.accessibleName() == "Happened 5 times"
    # Different words are a different notice; the same words again count on their row.
    app.host.notices.post("conversation_purged", Level.ERROR, title="Old notes")
    app.host.notices.post("trash_emptied", Level.ERROR)
    qtbot.waitUntil(lambda: len(area.rows()) == 2, timeout=WAIT_MS)
    assert [r.text for r in area.rows()] == [
        "The Trash was emptied.",
        "Deleted Old notes for good.",
    ]
    assert area.rows()[0].count_label.text() == "×6"
    assert not area.rows()[1].count_label.isVisible()
    # Each one is still in the history.
    assert len(area.history_texts()) == 7


def test_a_single_notice_shows_no_count(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app()
    app.host.notices.post("trash_emptied", Level.SUCCESS)
    area = app.window.notice_area
    qtbot.waitUntil(lambda: len(area.rows()) == 1, timeout=WAIT_MS)
    assert not area.rows()[0].count_label.isVisible()


def test_long_notices_never_take_more_than_their_share_of_the_window(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    window = app.window
    window.resize(900, 600)
    area = window.notice_area
    detail = "\n".join(f"server said line {n}" for n in range(30))
    for n in range(MAX_ROWS):
        app.host.notices.post("trash_emptied", Level.ERROR, detail=f"{n}\n{detail}")
    qtbot.waitUntil(lambda: len(area.rows()) == MAX_ROWS, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: area.rows_scroll.height() > 0, timeout=WAIT_MS)
    assert area.rows_scroll.height() <= window.height() * MAX_SHARE
    assert area.height() <= window.height() * MAX_SHARE + 40  # + its margins and button
    tab_space = window.height() - area.height()
    assert tab_space >= window.height() * (1 - MAX_SHARE) - 40
    # The rows beyond the cap are still reachable by scrolling.
    assert area.rows_scroll.verticalScrollBar().maximum() > 0
    # A taller window gives them more room, still within the share.
    window.resize(900, 1000)
    qtbot.waitUntil(lambda: area.rows_scroll.height() > 600 * MAX_SHARE, timeout=WAIT_MS)
    assert area.rows_scroll.height() <= 1000 * MAX_SHARE
    # A short notice takes only the room it needs.
    for row in list(area.rows()):
        area.dismiss(row)
    app.host.notices.post("trash_emptied", Level.SUCCESS)
    qtbot.waitUntil(lambda: len(area.rows()) == 1, timeout=WAIT_MS)
    assert area.rows_scroll.height() < 1000 * MAX_SHARE / 2
    assert area.rows_scroll.verticalScrollBar().maximum() == 0


def test_with_no_notices_the_history_button_stays_at_the_right_edge(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    area = app.window.notice_area
    qtbot.waitUntil(lambda: area.history_button.isVisible(), timeout=WAIT_MS)
    assert not area.rows()
    margin = area.width() - area.history_button.geometry().right()
    assert 0 <= margin <= 12, (area.width(), area.history_button.geometry())


def _undo(app: App, title: str, session_id: str) -> None:
    app.host.notices.post(
        "conversation_trashed",
        Level.SUCCESS,
        title=title,
        action=NoticeAction(RESTORE_ACTION, session_id),
    )


def test_an_undo_stays_on_top_until_used_dismissed_or_replaced(
    qtbot: QtBot, make_app: Callable[..., App], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notice_area, "OUTCOME_MS", 50)
    app = make_app()
    area = app.window.notice_area
    app.host.notices.post("conversation_purged", Level.ERROR, title="Old notes")
    _undo(app, "Trip plans", "s1")
    app.host.notices.post("branch_created", Level.SUCCESS, title="Later outcome")
    app.host.notices.post("trash_emptied", Level.ERROR)
    qtbot.waitUntil(lambda: len(area.rows()) == MAX_ROWS, timeout=WAIT_MS)
    # On top, above the older error, and it does not fade with the outcomes.
    assert area.rows()[0].text == "Moved Trip plans to the Trash."
    assert area.rows()[0].action_button.text() == "Undo"
    qtbot.waitUntil(
        lambda: not any("Later outcome" in t for t in area.visible_texts()), timeout=WAIT_MS
    )
    app.host.notices.post("branch_created", Level.SUCCESS, title="Yet another")
    qtbot.waitUntil(
        lambda: not any("Yet another" in t for t in area.visible_texts()), timeout=WAIT_MS
    )
    assert area.visible_texts()[0] == "Moved Trip plans to the Trash."
    # A second deletion within 15 s: both Undos stay, the newest on top.
    assert notice_area.UNDO_MIN_MS >= 15_000
    _undo(app, "Recipes", "s2")
    qtbot.waitUntil(
        lambda: (
            area.visible_texts()[:2]
            == ["Moved Recipes to the Trash.", "Moved Trip plans to the Trash."]
        ),
        timeout=WAIT_MS,
    )
    # Once an Undo has been shown its minimum time, a newer one replaces it.
    monkeypatch.setattr(notice_area, "UNDO_MIN_MS", 0)
    _undo(app, "Drafts", "s3")
    qtbot.waitUntil(
        lambda: (
            [t for t in area.visible_texts() if "to the Trash" in t]
            == ["Moved Drafts to the Trash."]
        ),
        timeout=WAIT_MS,
    )
    (undo,) = [r for r in area.rows() if r.text == "Moved Drafts to the Trash."]
    qtbot.mouseClick(undo.dismiss_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: not any("to the Trash" in t for t in area.visible_texts()), timeout=WAIT_MS
    )
