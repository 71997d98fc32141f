"""The window around the transcript: composer, notices, read-only tabs, languages, settings."""

from __future__ import annotations

import socket
from collections.abc import Callable

import orjson
from helpers.fake_openai_server import FakeOpenAIServer
from helpers.gui import (
    BRANCH,
    WAIT_MS,
    App,
    run,
    seed_session,
    user_texts,
)
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from branchwise.core.i18n.language import set_language
from branchwise.core.i18n.reasons import reason_text
from branchwise.core.ids import new_id
from branchwise.core.projection import events as ev
from branchwise.core.providers.detect import choose_provider
from branchwise.core.providers.openai import OpenAIProvider
from branchwise.desktop.widgets.settings_dialog import SettingsDialog


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_enter_sends_and_shift_enter_starts_a_new_line(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    app.window.new_conversation()
    tab = app.window.current_tab()
    assert tab is not None
    editor = tab.composer.editor
    qtbot.keyClicks(editor, "line one")
    qtbot.keyClick(editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(editor, "line two")
    assert editor.toPlainText() == "line one\nline two"
    assert tab.transcript.turn_widgets() == []
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    assert editor.toPlainText() == ""
    qtbot.waitUntil(lambda: len(tab.transcript.turn_widgets()) == 1, timeout=WAIT_MS)
    assert user_texts(tab.transcript.turn_widgets()) == ["line one\nline two"]
    widget = tab.transcript.turn_widgets()[0]
    qtbot.waitUntil(lambda: widget.branch_button.toolTip() == BRANCH, timeout=WAIT_MS)
    assert "line one line two" in widget.answer_text()
    assert "Demo" in app.window.provider_label.text()
    qtbot.waitUntil(lambda: tab.title == "line one line two", timeout=WAIT_MS)


def test_stop_keeps_the_partial_answer(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app(delay=0.05)
    app.window.new_conversation()
    tab = app.window.current_tab()
    assert tab is not None
    tab.composer.editor.setPlainText("tell me a long story")
    qtbot.mouseClick(tab.composer.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(tab.transcript.turn_widgets()), timeout=WAIT_MS)
    widget = tab.transcript.turn_widgets()[0]
    qtbot.waitUntil(lambda: len(widget.answer_text()) > 10, timeout=WAIT_MS)
    qtbot.mouseClick(tab.composer.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: widget.status_label.text() == "Stopped before the answer was complete.",
        timeout=WAIT_MS,
    )
    assert 10 < len(widget.answer_text()) < 200
    qtbot.waitUntil(lambda: widget.branch_button.isEnabled(), timeout=WAIT_MS)
    assert tab.composer.send_button.isVisible()


def test_a_provider_failure_reaches_the_notice_area(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    provider = OpenAIProvider(f"http://127.0.0.1:{_closed_port()}/v1", "some-model")
    app = make_app(provider=provider)
    app.window.new_conversation()
    tab = app.window.current_tab()
    assert tab is not None
    tab.composer.editor.setPlainText("hello?")
    qtbot.keyClick(tab.composer.editor, Qt.Key.Key_Return)
    # The notice names the conversation it is about.
    expected = f"hello?: {reason_text('provider_unreachable')}"
    qtbot.waitUntil(lambda: expected in app.notice_texts(), timeout=WAIT_MS)
    widget = tab.transcript.turn_widgets()[0]
    assert widget.status_label.text().startswith("This turn ended with an error: ")
    assert "127.0.0.1" in widget.status_label.text()
    row = next(r for r in app.window.notice_area.rows() if r.text == expected)
    assert "127.0.0.1" in row.detail_label.text()
    # A failed turn is still a finished turn: it can be branched.
    qtbot.waitUntil(lambda: widget.branch_button.toolTip() == BRANCH, timeout=WAIT_MS)
    assert expected in app.window.notice_area.history_texts()


def test_a_session_written_elsewhere_opens_read_only_and_follows(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    store = app.host.store
    sid = seed_session(store, ["shared"])
    other = store.open_writer(sid)  # another writer holds the lease
    try:
        tab = app.window.open_tab(sid)
        qtbot.waitUntil(lambda: tab.state_label.isVisible(), timeout=WAIT_MS)
        assert tab.state_label.text() == "Read-only: " + reason_text("lease_held")
        assert tab.composer.editor.isReadOnly()
        turn = new_id("turn")
        other.commit([ev.turn_start(turn), ev.user_message(new_id("msg"), "from elsewhere")])
        other.commit(
            [ev.assistant_message(new_id("msg"), "ok", "demo"), ev.turn_end(turn, "completed")]
        )
        qtbot.waitUntil(lambda: len(tab.transcript.turn_widgets()) == 2, timeout=WAIT_MS)
        assert user_texts(tab.transcript.turn_widgets()) == ["shared", "from elsewhere"]
    finally:
        other.close()
    qtbot.waitUntil(lambda: not tab.composer.editor.isReadOnly(), timeout=WAIT_MS)
    assert not tab.state_label.isVisible()


def test_live_language_switch_retranslates_branch_actions_and_menus(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["bonjour"])
    app.window.open_tab(sid)
    widget = app.turns(sid)[0]
    qtbot.waitUntil(lambda: widget.branch_button.toolTip() == BRANCH, timeout=WAIT_MS)
    set_language("zh_Hans")
    assert widget.branch_button.toolTip() == "在新对话中分支"
    assert widget.branch_button.accessibleName() == "在新对话中分支"
    assert app.window.file_menu.title() == "文件(&F)"
    assert app.tab(sid).composer.send_button.text() != "Send"
    app.window.language_actions["zh_Hant"].trigger()
    assert widget.branch_button.accessibleName() == "在新對話中分支"
    assert app.host.settings.language == "zh_Hant"
    settings = orjson.loads((app.root / "settings.json").read_bytes())
    assert settings["language"] == "zh_Hant"
    app.window.language_actions["en"].trigger()
    assert widget.branch_button.toolTip() == BRANCH


def test_settings_are_validated_inline_and_saved(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app(provider_factory=choose_provider)
    server = run(qtbot, FakeOpenAIServer(models=["llama3.2", "qwen2.5"]).start())
    try:
        dialog = app.window.show_settings()
        assert isinstance(dialog, SettingsDialog)
        assert dialog.api_key.echoMode() == dialog.api_key.EchoMode.Password
        dialog.provider.setCurrentIndex(dialog.provider.findData("openai"))
        dialog.base_url.setText("ftp://not-a-model-server")
        dialog.save()
        assert dialog.isVisible()
        assert dialog.error_text("baseUrl") == reason_text("provider_invalid_url")
        dialog.base_url.setText(server.base_url)
        qtbot.mouseClick(dialog.refresh_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: dialog.model.count() == 2, timeout=WAIT_MS)
        assert dialog.model.currentText() == "llama3.2"
        dialog.api_key.setText("sk-secret")
        dialog.save()
        assert not dialog.isVisible()
        saved = orjson.loads((app.root / "settings.json").read_bytes())
        assert (saved["provider"], saved["baseUrl"], saved["model"]) == (
            "openai",
            server.base_url,
            "llama3.2",
        )
        assert app.window.provider_label.text() == app.host.provider.label
        assert "llama3.2" in app.window.provider_label.text()
    finally:
        run(qtbot, server.stop())


def test_settings_say_plainly_when_a_server_lists_no_models(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app(provider_factory=choose_provider)
    server = run(qtbot, FakeOpenAIServer(list_models=False).start())
    try:
        dialog = app.window.show_settings()
        assert isinstance(dialog, SettingsDialog)
        dialog.provider.setCurrentIndex(dialog.provider.findData("openai"))
        dialog.base_url.setText(server.base_url)
        qtbot.mouseClick(dialog.refresh_button, Qt.MouseButton.LeftButton)
        expected = reason_text("provider_model_list_unavailable")
        qtbot.waitUntil(lambda: dialog.models_status.text() == expected, timeout=WAIT_MS)
        assert dialog.error_text("model") == ""
        assert dialog.refresh_button.isEnabled()
        dialog.model.setEditText("typed-model")
        dialog.save()
        assert not dialog.isVisible()
        saved = orjson.loads((app.root / "settings.json").read_bytes())
        assert saved["model"] == "typed-model"
    finally:
        run(qtbot, server.stop())
