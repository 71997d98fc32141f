"""Edit, Regenerate and Retry as the user sees them: the editor, the new tab, the branch menu."""

from __future__ import annotations

from collections.abc import Callable

from helpers.gui import WAIT_MS, App, seed_session, user_texts
from pytestqt.qtbot import QtBot

from branchwise.core.projection import events as ev
from branchwise.core.store.store import SessionStore
from branchwise.desktop.widgets.turn_widget import TurnWidget


def _open(qtbot: QtBot, app: App, sid: str, turns: int) -> list[TurnWidget]:
    app.window.open_tab(sid)
    qtbot.waitUntil(lambda: len(app.turns(sid)) == turns, timeout=WAIT_MS)
    return app.turns(sid)


def _branch_of(app: App, sid: str, turn_id: str) -> str | None:
    branches = app.host.index.branches_at(sid, turn_id)
    return branches[0].session_id if branches else None


def _answered(app: App, sid: str) -> bool:
    tab = app.window.tab_for(sid)
    if tab is None:
        return False
    widgets = tab.transcript.turn_widgets()
    return bool(widgets) and widgets[-1].row.end_reason == "completed"


def _menu_texts(widget: TurnWidget) -> list[str]:
    """The branches listed (not the "Compare with…" submenu after them)."""
    actions = widget.branches_button.menu().actions()
    return [action.text() for action in actions if action.menu() is None]


def test_edit_opens_in_place_and_sends_the_prompt_as_a_branch_in_a_new_tab(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["first question", "second question"])
    first, second = _open(qtbot, app, sid, 2)
    assert second.edit_button.isVisible() and second.edit_button.text() == "Edit"
    assert not second.edit_box.isVisible()

    second.edit_button.click()
    assert second.edit_box.isVisible() and not second.edit_button.isVisible()
    assert second.edit_text.toPlainText() == "second question"
    assert second.send_as_branch_button.text() == "Send as a branch"
    second.edit_text.setPlainText("   ")
    assert not second.send_as_branch_button.isEnabled()
    second.edit_cancel_button.click()
    assert not second.edit_box.isVisible() and second.edit_button.isVisible()
    assert app.host.index.children(sid) == []

    second.edit_button.click()
    second.edit_text.setPlainText("second question, but in French")
    second.send_as_branch_button.click()
    turn_id = second.row.turn_id or ""
    qtbot.waitUntil(lambda: _branch_of(app, sid, turn_id) is not None, timeout=WAIT_MS)
    child = str(_branch_of(app, sid, turn_id))
    qtbot.waitUntil(lambda: _answered(app, child), timeout=WAIT_MS)
    current = app.window.current_tab()
    assert current is not None and current.session_id == child
    assert user_texts(app.turns(child)) == ["first question", "second question, but in French"]
    assert "second question, but in French" in app.turns(child)[-1].answer_text()
    # The parent is untouched; its edited turn lists the branch by what differs.
    app.window.open_tab(sid)
    assert user_texts(app.turns(sid)) == ["first question", "second question"]
    qtbot.waitUntil(lambda: second.branches_button.isVisible(), timeout=WAIT_MS)
    assert second.branches_button.text() == "1 branch"
    assert _menu_texts(second) == [
        "Edited: second question, but in French · first question (branch 1)"
    ]
    assert not first.branches_button.isVisible()


def test_regenerate_asks_the_first_prompt_again_in_a_branch(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["only question", "follow-up"])
    first, _second = _open(qtbot, app, sid, 2)
    assert first.regenerate_button.isVisible() and first.regenerate_button.text() == "Regenerate"
    assert not first.retry_button.isVisible()
    first.regenerate_button.click()
    turn_id = first.row.turn_id or ""
    qtbot.waitUntil(lambda: _branch_of(app, sid, turn_id) is not None, timeout=WAIT_MS)
    child = str(_branch_of(app, sid, turn_id))
    qtbot.waitUntil(lambda: _answered(app, child), timeout=WAIT_MS)
    assert user_texts(app.turns(child)) == ["only question"]
    app.window.open_tab(sid)
    qtbot.waitUntil(lambda: first.branches_button.isVisible(), timeout=WAIT_MS)
    assert _menu_texts(first) == ["Regenerated 2 · only question (branch 1)"]


def _seed_failed(store: SessionStore) -> str:
    with store.create("Flaky") as writer:
        writer.commit([ev.turn_start("t_fail"), ev.user_message("u_fail", "are you there?")])
        writer.commit([ev.turn_end("t_fail", ev.EndReason.ERROR, "server said 500")])
        return writer.session_id


def test_retry_on_a_failed_turn_runs_its_prompt_again_below_it(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    sid = _seed_failed(app.host.store)
    (failed,) = _open(qtbot, app, sid, 1)
    assert failed.retry_button.isVisible() and failed.retry_button.text() == "Retry"
    assert not failed.regenerate_button.isVisible()
    assert "server said 500" in failed.status_label.text()
    failed.retry_button.click()
    qtbot.waitUntil(lambda: len(app.turns(sid)) == 2 and _answered(app, sid), timeout=WAIT_MS)
    assert user_texts(app.turns(sid)) == ["are you there?", "are you there?"]
    assert app.turns(sid)[0].row.end_reason == "error"
    assert not app.turns(sid)[1].retry_button.isVisible()
