"""The per-turn branch action as the user sees it, and what a click does."""

from __future__ import annotations

import shutil
from collections.abc import Callable

from helpers.gui import (
    BRANCH,
    TURN_OPEN,
    WAIT_MS,
    App,
    seed_legacy_session,
    seed_session,
    user_texts,
)
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from branchwise.core.i18n.reasons import reason_text
from branchwise.core.store.store import SessionStore
from branchwise.desktop.widgets.turn_widget import TurnWidget

UNVERIFIABLE = (
    "Branchwise cannot tell where this turn ends in the saved conversation, "
    "so it cannot be branched from here."
)


def _enabled_with_branch_tooltip(widget: TurnWidget) -> bool:
    button = widget.branch_button
    return button.isEnabled() and button.toolTip() == BRANCH


def _send(qtbot: QtBot, app: App, session_id: str, text: str) -> None:
    editor = app.tab(session_id).composer.editor
    editor.setPlainText(text)
    qtbot.keyClick(editor, Qt.Key.Key_Return)


def test_finished_turns_offer_the_branch_action(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["first question", "second question"])
    app.window.open_tab(sid)
    qtbot.waitUntil(
        lambda: len(app.turns(sid)) == 2 and all(map(_enabled_with_branch_tooltip, app.turns(sid))),
        timeout=WAIT_MS,
    )
    for widget in app.turns(sid):
        assert widget.branch_button.accessibleName() == BRANCH
        assert widget.branch_button.accessibleDescription() == ""


def test_only_the_running_turn_is_disabled(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app(delay=0.03)
    sid = seed_session(app.host.store, ["one", "two"])
    app.window.open_tab(sid)
    qtbot.waitUntil(lambda: all(map(_enabled_with_branch_tooltip, app.turns(sid))), timeout=WAIT_MS)
    _send(qtbot, app, sid, "three, slowly")
    qtbot.waitUntil(lambda: len(app.turns(sid)) == 3, timeout=WAIT_MS)
    running = app.turns(sid)[-1]
    qtbot.waitUntil(lambda: "slowly" in running.answer_text(), timeout=WAIT_MS)
    assert not running.branch_button.isEnabled()
    assert running.branch_button.toolTip() == TURN_OPEN
    assert running.branch_button.accessibleDescription() == TURN_OPEN
    assert running.branch_button.accessibleName() == BRANCH
    assert all(map(_enabled_with_branch_tooltip, app.turns(sid)[:2]))
    assert app.tab(sid).composer.stop_button.isVisible()
    qtbot.waitUntil(lambda: _enabled_with_branch_tooltip(running), timeout=WAIT_MS)
    assert app.tab(sid).composer.send_button.isVisible()


def test_message_only_history_is_unverifiable(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app()
    sid = seed_legacy_session(app.host.store)
    app.window.open_tab(sid)
    qtbot.waitUntil(
        lambda: (
            bool(app.turns(sid))
            and all(w.branch_button.toolTip() == UNVERIFIABLE for w in app.turns(sid))
        ),
        timeout=WAIT_MS,
    )
    assert user_texts(app.turns(sid)) == ["What is a fork?", "And a branch?"]
    for widget in app.turns(sid):
        assert not widget.branch_button.isEnabled()
        assert widget.branch_button.accessibleDescription() == UNVERIFIABLE


def test_click_opens_one_child_while_the_parent_streams(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app(delay=0.03)
    store: SessionStore = app.host.store
    sid = seed_session(store, ["alpha", "beta"], title="Planning")
    app.window.open_tab(sid)
    qtbot.waitUntil(lambda: all(map(_enabled_with_branch_tooltip, app.turns(sid))), timeout=WAIT_MS)
    _send(qtbot, app, sid, "gamma, streaming")
    qtbot.waitUntil(lambda: len(app.turns(sid)) == 3, timeout=WAIT_MS)
    running = app.turns(sid)[-1]
    qtbot.waitUntil(lambda: "streaming" in running.answer_text(), timeout=WAIT_MS)

    first = app.turns(sid)[0]
    qtbot.mouseClick(first.branch_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(first.branch_button, Qt.MouseButton.LeftButton)  # a double click
    qtbot.waitUntil(lambda: len(app.window.conversation_tabs()) == 2, timeout=WAIT_MS)
    child = app.window.current_tab()
    assert child is not None and child.session_id != sid
    cid = child.session_id
    qtbot.waitUntil(lambda: len(app.turns(cid)) == 1, timeout=WAIT_MS)
    assert user_texts(app.turns(cid)) == ["alpha"]
    assert app.turns(cid)[0].shown_messages() == first.shown_messages()
    # The parent kept streaming and then finished.
    assert not running.branch_button.isEnabled()
    qtbot.waitUntil(lambda: _enabled_with_branch_tooltip(running), timeout=WAIT_MS)
    assert "streaming" in running.answer_text()
    assert len([m for m in store.iter_manifests()]) == 2

    assert app.window.sidebar.parent_of(cid) == sid
    assert child.banner.isVisible()
    assert child.banner.label.text() == "Branched from turn 1 of Planning · From turn 1"
    qtbot.mouseClick(child.banner.open_button, Qt.MouseButton.LeftButton)
    assert app.window.current_tab() is app.tab(sid)
    qtbot.waitUntil(lambda: first.branches_button.isVisible(), timeout=WAIT_MS)
    assert first.branches_button.text() == "1 branch"
    # The branch is named apart from its parent, in the notice and the tabs.
    qtbot.waitUntil(
        lambda: any(
            reason_text("fork_created", title="Planning (branch 1) · From turn 1") == t
            for t in app.notice_texts()
        ),
        timeout=WAIT_MS,
    )
    tab_titles = [app.window.tabs.tabText(i) for i in range(app.window.tabs.count())]
    assert "Planning (branch 1) · From turn 1" in tab_titles and "Planning" in tab_titles


def test_a_second_click_after_success_makes_another_child(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["only"])
    app.window.open_tab(sid)
    qtbot.waitUntil(lambda: all(map(_enabled_with_branch_tooltip, app.turns(sid))), timeout=WAIT_MS)
    for expected in (2, 3):
        app.window.open_tab(sid)
        widget = app.turns(sid)[0]
        qtbot.waitUntil(lambda w=widget: _enabled_with_branch_tooltip(w), timeout=WAIT_MS)
        qtbot.mouseClick(widget.branch_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(
            lambda n=expected: len(app.window.conversation_tabs()) == n, timeout=WAIT_MS
        )
    qtbot.waitUntil(lambda: app.turns(sid)[0].branches_button.text() == "2 branches")


def test_a_refused_fork_says_why(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["doomed"])
    app.window.open_tab(sid)
    qtbot.waitUntil(lambda: all(map(_enabled_with_branch_tooltip, app.turns(sid))), timeout=WAIT_MS)
    shutil.rmtree(app.host.store.session_dir(sid))
    qtbot.mouseClick(app.turns(sid)[0].branch_button, Qt.MouseButton.LeftButton)
    expected = "Could not branch: The conversation to branch from no longer exists."
    qtbot.waitUntil(lambda: expected in app.notice_texts(), timeout=WAIT_MS)
    assert len(app.window.conversation_tabs()) == 1
    qtbot.waitUntil(lambda: app.turns(sid)[0].branch_button.isEnabled(), timeout=WAIT_MS)
