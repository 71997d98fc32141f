"""Edit, Regenerate and Retry as the user sees them: the edit box, the new tab, the branch menu."""

from __future__ import annotations

from collections.abc import Callable

from helpers.gui import WAIT_MS, App, seed_session
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from branchwise.core.i18n.language import set_language
from branchwise.core.projection import events as ev
from branchwise.desktop.widgets.conversation_tab import ConversationTab
from branchwise.desktop.widgets.turn_widget import (
    CANCEL_EDIT_BUTTON,
    SEND_EDIT_BUTTON,
    TurnWidget,
)


def _shown_user_text(widget: TurnWidget) -> list[str]:
    return [text for role, text in widget.shown_messages() if role == "user"]


def _current_tab(app: App) -> ConversationTab:
    tab = app.window.tabs.currentWidget()
    assert isinstance(tab, ConversationTab)
    return tab


def _menu_texts(widget: TurnWidget) -> list[str]:
    return [action.text() for action in widget.branches_button.menu().actions()]


def _open(qtbot: QtBot, app: App, questions: list[str]) -> str:
    sid = seed_session(app.host.store, questions, title="Trip")
    app.window.open_tab(sid)
    qtbot.waitUntil(lambda: len(app.turns(sid)) == len(questions), timeout=WAIT_MS)
    return sid


def test_edit_opens_in_place_and_sends_as_a_branch_in_a_new_tab(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    sid = _open(qtbot, app, ["Where to?", "And then?"])
    second = app.turns(sid)[1]
    assert second.edit_button.isVisible() and second.edit_button.text() == "Edit"
    assert second.edit_button.toolTip() == "Edit this prompt and send it as a new branch"

    second.edit_button.click()
    box = second.edit_box
    assert box is not None and box.isVisible() and second.edit_field is not None
    assert second.edit_field.toPlainText() == "And then?"
    assert _shown_user_text(second) == ["And then?"]  # the label is there, hidden
    assert second.message_label(second.row.entries[0].message_id).isHidden()  # type: ignore[union-attr]
    send = box.findChild(QPushButton, SEND_EDIT_BUTTON)
    assert send is not None and send.text() == "Send as a branch"
    second.edit_field.setPlainText("   ")
    assert not send.isEnabled()  # an empty prompt cannot be sent
    second.edit_field.setPlainText("And after that, by train?")
    assert send.isEnabled()
    send.click()

    qtbot.waitUntil(lambda: app.window.tabs.count() == 2, timeout=WAIT_MS)
    branch = _current_tab(app)
    child = branch.session_id
    assert child != sid and branch.title == "Trip (branch 1)"
    qtbot.waitUntil(
        lambda: len(app.turns(child)) == 2 and app.turns(child)[1].row.end_reason == "completed",
        timeout=WAIT_MS,
    )
    edited = app.turns(child)[1]
    assert _shown_user_text(edited) == ["And after that, by train?"]
    assert "And after that, by train?" in edited.answer_text()  # the demo echoes the prompt
    assert edited.status_label.isHidden()
    # The parent is untouched; its turn 2 lists the edit and what differs.
    assert (
        second.edit_box is None
        and not second.message_label(  # type: ignore[union-attr]
            second.row.entries[0].message_id
        ).isHidden()
    )
    assert _shown_user_text(app.turns(sid)[1]) == ["And then?"]
    # (The parent's tab is behind the branch's: "shown" is "not hidden" there.)
    qtbot.waitUntil(lambda: not app.turns(sid)[1].branches_button.isHidden(), timeout=WAIT_MS)
    assert app.turns(sid)[1].branches_button.text() == "1 branch"
    assert _menu_texts(app.turns(sid)[1]) == ["Edited: And after that, by train?"]
    assert app.turns(sid)[0].branches_button.isHidden()


def test_cancel_closes_the_edit_box_and_makes_nothing(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    sid = _open(qtbot, app, ["Where to?"])
    first = app.turns(sid)[0]
    first.edit_button.click()
    assert first.edit_box is not None and not first.edit_button.isVisible()
    cancel = first.edit_box.findChild(QPushButton, CANCEL_EDIT_BUTTON)
    assert cancel is not None and cancel.text() == "Cancel"
    cancel.click()
    assert first.edit_box is None and first.edit_button.isVisible()
    assert _shown_user_text(first) == ["Where to?"]
    assert app.window.tabs.count() == 1
    assert len(app.host.store.list_sessions()) == 1


def test_regenerate_opens_another_answer_in_a_new_tab_and_the_menu_lists_it(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    sid = _open(qtbot, app, ["Where to?", "And then?"])
    first = app.turns(sid)[0]
    assert first.regenerate_button.isVisible()
    assert first.regenerate_button.text() == "Regenerate"
    first.regenerate_button.click()
    qtbot.waitUntil(lambda: app.window.tabs.count() == 2, timeout=WAIT_MS)
    child = _current_tab(app).session_id
    qtbot.waitUntil(
        lambda: len(app.turns(child)) == 1 and app.turns(child)[0].row.end_reason == "completed",
        timeout=WAIT_MS,
    )
    assert _shown_user_text(app.turns(child)[0]) == ["Where to?"]
    assert app.turns(child)[0].answer_text()
    qtbot.waitUntil(lambda: not app.turns(sid)[0].branches_button.isHidden(), timeout=WAIT_MS)
    assert _menu_texts(app.turns(sid)[0]) == ["Regenerated: Trip (branch 1)"]


def test_retry_runs_a_failed_prompt_again_in_the_same_conversation(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["Where to?"], title="Trip")
    with app.host.store.open_writer(sid) as writer:
        writer.commit([ev.turn_start("bad"), ev.user_message("u-bad", "Book a train")])
        writer.commit([ev.turn_end("bad", "error", "the server did not answer")])
    app.window.open_tab(sid)
    qtbot.waitUntil(lambda: len(app.turns(sid)) == 2, timeout=WAIT_MS)
    ok, failed = app.turns(sid)
    assert not ok.retry_button.isVisible()
    assert failed.retry_button.isVisible() and failed.retry_button.text() == "Retry"
    assert not failed.regenerate_button.isVisible()  # no answer to regenerate
    assert "the server did not answer" in failed.status_label.text()
    failed.retry_button.click()
    qtbot.waitUntil(
        lambda: len(app.turns(sid)) == 3 and app.turns(sid)[2].row.end_reason == "completed",
        timeout=WAIT_MS,
    )
    retried = app.turns(sid)[2]
    assert _shown_user_text(retried) == ["Book a train"]
    assert "Book a train" in retried.answer_text()
    assert app.window.tabs.count() == 1  # no branch: the same conversation


def test_the_actions_speak_chinese(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app()
    sid = _open(qtbot, app, ["Where to?"])
    set_language("zh_Hans")
    app.window.retranslate_ui()
    first = app.turns(sid)[0]
    assert (first.edit_button.text(), first.regenerate_button.text()) == ("编辑", "重新生成")
    set_language("zh_Hant")
    app.window.retranslate_ui()
    assert (first.edit_button.text(), first.regenerate_button.text()) == ("編輯", "重新產生")
