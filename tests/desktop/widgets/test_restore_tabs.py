"""Open tabs, the tab in front and the panes come back; the file follows every tab change."""

from __future__ import annotations

from collections.abc import Callable

from helpers.gui import WAIT_MS, App, run, seed_session
from pytestqt.qtbot import QtBot

from branchwise.core.ids import new_session_id
from branchwise.desktop.host.window_state import load_window_state


def test_tab_changes_are_saved_without_a_clean_quit(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    first = seed_session(app.host.store, ["one"], "First")
    second = seed_session(app.host.store, ["two"], "Second")
    app.window.open_session(first)
    app.window.open_session(second)
    qtbot.waitUntil(
        lambda: (s := load_window_state(app.root)) is not None and s.tabs == (first, second),
        timeout=WAIT_MS,
    )
    app.window.tabs.setCurrentIndex(0)
    qtbot.waitUntil(
        lambda: (s := load_window_state(app.root)) is not None and s.current == first,
        timeout=WAIT_MS,
    )
    app.window.tabs.tabCloseRequested.emit(0)
    qtbot.waitUntil(
        lambda: (s := load_window_state(app.root)) is not None and s.tabs == (second,),
        timeout=WAIT_MS,
    )


def test_restoring_reopens_tabs_in_order_and_names_what_was_skipped(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    before = make_app()
    first = seed_session(before.host.store, ["one"], "First")
    second = seed_session(before.host.store, ["two"], "Second")
    third = seed_session(before.host.store, ["three"], "Third")
    for session_id in (first, second, third):
        before.window.open_session(session_id)
    before.window.tabs.setCurrentIndex(1)
    before.window.splitter.setSizes([333, 700])
    wanted = before.window.splitter.sizes()
    before.window.save_state()
    saved = load_window_state(before.root)
    assert saved is not None
    run(qtbot, before.host.shutdown())

    after = make_app(root=before.root)
    state = saved.__class__(
        tabs=(first, new_session_id(), second, third),
        current=saved.current,
        geometry=saved.geometry,
        splitter=saved.splitter,
    )
    after.window.restore_state(state)
    assert [tab.title for tab in after.window.conversation_tabs()] == ["First", "Second", "Third"]
    current = after.window.current_tab()
    assert current is not None and current.title == "Second"
    assert after.window.splitter.sizes()[0] == wanted[0]  # the sidebar keeps its width
    assert any(
        text.startswith("Tabs from last time that could not be reopened: 1")
        for text in after.notice_texts()
    )
