"""Conversation ▸ Conversation settings…: the values a turn then sends, and a refusal in words."""

from __future__ import annotations

from collections.abc import Callable

from helpers.fake_openai_server import FakeOpenAIServer
from helpers.gui import WAIT_MS, App, run
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from branchwise.core.conversation.settings import ConversationSettings
from branchwise.core.providers.detect import choose_provider
from branchwise.core.settings import Settings


def test_a_conversations_own_settings_reach_the_server_and_others_keep_the_defaults(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app(provider_factory=choose_provider)
    server = run(qtbot, FakeOpenAIServer(models=["base-model", "own-model"]).start())
    try:
        app.host.update_settings(
            Settings(provider="openai", base_url=server.base_url, model="base-model")
        )
        assert not app.window.conversation_settings_action.isEnabled()
        app.window.new_conversation()
        own = app.window.current_tab()
        assert own is not None
        assert app.window.conversation_settings_action.text() == "Conversation settings…"
        dialog = app.window.show_conversation_settings()
        assert dialog is not None
        assert dialog.model.placeholderText() == "As in Settings (base-model)"
        dialog.model.setText("own-model")
        dialog.system.setPlainText("Answer in one line.")
        dialog.own_temperature.setChecked(True)
        dialog.temperature.setValue(0.3)
        dialog.save()
        assert not dialog.isVisible()

        own.composer.editor.setPlainText("hello")
        qtbot.mouseClick(own.composer.send_button, Qt.MouseButton.LeftButton)
        chats = lambda: [r for r in server.requests if r["path"].endswith("/chat/completions")]  # noqa: E731
        qtbot.waitUntil(lambda: len(chats()) == 1, timeout=WAIT_MS)
        sent = chats()[0]["json"]
        assert sent["model"] == "own-model" and sent["temperature"] == 0.3
        assert sent["messages"][0] == {"role": "system", "content": "Answer in one line."}
        qtbot.waitUntil(lambda: not app.host.is_running(own.session_id), timeout=WAIT_MS)

        app.window.new_conversation()
        other = app.window.current_tab()
        assert other is not None and other is not own
        other.composer.editor.setPlainText("hi")
        qtbot.mouseClick(other.composer.send_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: len(chats()) == 2, timeout=WAIT_MS)
        sent = chats()[1]["json"]
        assert sent["model"] == "base-model" and "temperature" not in sent
        assert sent["messages"][0]["role"] == "user"
        qtbot.waitUntil(lambda: not app.host.is_running(other.session_id), timeout=WAIT_MS)
    finally:
        run(qtbot, server.stop())


def test_changing_settings_while_an_answer_streams_is_refused_in_words(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app(delay=0.05)
    app.window.new_conversation()
    tab = app.window.current_tab()
    assert tab is not None
    tab.composer.editor.setPlainText("a long story")
    qtbot.mouseClick(tab.composer.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: app.host.is_running(tab.session_id), timeout=WAIT_MS)
    dialog = app.window.show_conversation_settings()
    assert dialog is not None
    dialog.model.setText("another")
    dialog.save()
    assert dialog.isVisible()
    assert dialog.error.text() == "Wait for the answer to finish, then try again."
    app.host.stop(tab.session_id)
    qtbot.waitUntil(lambda: not app.host.is_running(tab.session_id), timeout=WAIT_MS)
    dialog.save()
    assert not dialog.isVisible()
    session = app.host.session(tab.session_id)
    assert session is not None and session.conversation_settings.model == "another"


def test_a_branch_asked_of_the_demo_keeps_it_until_the_person_unticks_it(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app(provider_factory=choose_provider)
    server = run(qtbot, FakeOpenAIServer(models=["base-model"]).start())
    try:
        app.host.update_settings(
            Settings(provider="openai", base_url=server.base_url, model="base-model", demo_pace=0)
        )
        app.window.new_conversation()
        tab = app.window.current_tab()
        assert tab is not None
        app.host.configure(tab.session_id, ConversationSettings(model="demo", model_server="demo"))
        dialog = app.window.show_conversation_settings()
        assert dialog is not None
        assert dialog.server.text() == "Keep asking the offline demo responder"
        assert dialog.server.isChecked() and not dialog.server.isHidden()
        dialog.system.setPlainText("Be brief.")
        dialog.save()
        settings = app.host.session(tab.session_id).projection.settings  # type: ignore[union-attr]
        assert settings.model_server == "demo" and settings.system == "Be brief."

        chats = lambda: [r for r in server.requests if r["path"].endswith("/chat/completions")]  # noqa: E731
        tab.composer.editor.setPlainText("hello")
        qtbot.mouseClick(tab.composer.send_button, Qt.MouseButton.LeftButton)
        answered = lambda: app.host.session(tab.session_id).projection.turns  # type: ignore[union-attr]  # noqa: E731
        qtbot.waitUntil(lambda: len(answered()) == 1 and not answered()[0].is_open, timeout=WAIT_MS)
        assert answered()[0].end_reason == "completed"
        assert chats() == []  # the demo answered

        dialog = app.window.show_conversation_settings()
        assert dialog is not None
        dialog.server.setChecked(False)
        dialog.model.setText("")
        dialog.save()
        tab.composer.editor.setPlainText("again")
        qtbot.mouseClick(tab.composer.send_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: len(chats()) == 1, timeout=WAIT_MS)
        qtbot.waitUntil(lambda: not app.host.is_running(tab.session_id), timeout=WAIT_MS)
    finally:
        run(qtbot, server.stop())
