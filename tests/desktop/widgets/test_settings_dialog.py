"""The settings dialog as a person uses it: the demo pace, errors, the shortcut, the models."""

from __future__ import annotations

import socket
from collections.abc import Callable

import orjson
from helpers.fake_openai_server import FakeOpenAIServer
from helpers.gui import WAIT_MS, App, run
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QKeySequence
from pytestqt.qtbot import QtBot

from branchwise.core.i18n.reasons import reason_text
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.providers.detect import choose_provider
from branchwise.core.settings import DEFAULT_DEMO_PACE
from branchwise.desktop.widgets.settings_dialog import SettingsDialog


def test_the_demo_pace_is_a_field_that_is_saved_and_used(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app(provider_factory=choose_provider)
    dialog = app.window.show_settings()
    assert isinstance(dialog, SettingsDialog)
    assert dialog.demo_pace.value() == DEFAULT_DEMO_PACE
    assert dialog.demo_pace.isEnabled()
    assert "words per second" in dialog.demo_pace.suffix() + dialog.demo_pace.toolTip()
    assert dialog.demo_pace.specialValueText() == "Instant"
    dialog.demo_pace.setValue(12)
    dialog.save()
    assert not dialog.isVisible()
    assert orjson.loads((app.root / "settings.json").read_bytes())["demoPace"] == 12
    assert app.host.settings.demo_pace == 12
    # The environment of the test run asks for instant answers (conftest), over the setting.
    assert isinstance(app.host.provider, DemoProvider)


def _wholly_shown(dialog: SettingsDialog, name: str) -> bool:
    label = dialog.errors[name]
    if label.isHidden() or not label.text():
        return False
    bottom = label.mapTo(dialog, QPoint(0, label.height())).y()
    return label.height() >= label.heightForWidth(label.width()) and bottom <= dialog.height()


def test_a_long_error_is_shown_whole(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app()
    dialog = app.window.show_settings()
    assert isinstance(dialog, SettingsDialog)
    qtbot.waitExposed(dialog)
    dialog.provider.setCurrentIndex(dialog.provider.findData("openai"))
    dialog.base_url.setText("ftp://not-a-model-server")
    dialog.save()
    qtbot.waitUntil(lambda: _wholly_shown(dialog, "baseUrl"), timeout=WAIT_MS)
    with socket.socket() as probe:  # a port nothing listens on once this closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dialog.base_url.setText(f"http://127.0.0.1:{port}/v1")
    dialog.refresh_models()
    # Two lines at the dialog's width: both shown (the second was cut in half before).
    qtbot.waitUntil(lambda: dialog.error_text("model") != "", timeout=WAIT_MS)
    assert dialog.error_text("model") == reason_text("provider_unreachable")
    qtbot.waitUntil(lambda: _wholly_shown(dialog, "model"), timeout=WAIT_MS)
    # Asking again clears the old address error: it no longer holds.
    assert dialog.error_text("baseUrl") == ""


def test_ctrl_comma_opens_settings(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app()
    assert app.window.settings_action.shortcut() == QKeySequence("Ctrl+,")
    app.window.activateWindow()
    qtbot.waitUntil(app.window.isActiveWindow, timeout=WAIT_MS)
    qtbot.keyClick(app.window, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(
        lambda: (
            isinstance(app.window._settings_dialog, SettingsDialog)
            and app.window._settings_dialog.isVisible()
        ),
        timeout=WAIT_MS,
    )
    assert "Settings" in dict(app.window.show_shortcuts().rows())


def test_embedding_models_are_hidden_unless_all_are_shown(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app(provider_factory=choose_provider)
    models = ["text-embedding-3-small", "llama3.2", "nomic-embed-text", "qwen2.5", "marked"]
    fields = {"marked": {"type": "embeddings"}}
    server = run(qtbot, FakeOpenAIServer(models=models, model_fields=fields).start())
    try:
        dialog = app.window.show_settings()
        assert isinstance(dialog, SettingsDialog)
        assert dialog.show_all_models.text() == "Show all models"
        assert not dialog.show_all_models.isChecked()
        dialog.provider.setCurrentIndex(dialog.provider.findData("openai"))
        dialog.base_url.setText(server.base_url)
        qtbot.mouseClick(dialog.refresh_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: dialog.model.count() == 2, timeout=WAIT_MS)
        listed = [dialog.model.itemText(i) for i in range(dialog.model.count())]
        assert listed == ["llama3.2", "qwen2.5"]
        assert dialog.model.currentText() == "llama3.2"  # never an embedding model
        assert "3 embedding models hidden" in dialog.models_status.text()
        dialog.show_all_models.click()
        qtbot.waitUntil(lambda: dialog.model.count() == len(models), timeout=WAIT_MS)
        assert [dialog.model.itemText(i) for i in range(dialog.model.count())] == models
        assert dialog.model.currentText() == "llama3.2"  # the choice is kept
        dialog.show_all_models.click()
        qtbot.waitUntil(lambda: dialog.model.count() == 2, timeout=WAIT_MS)
    finally:
        run(qtbot, server.stop())


def test_a_server_switched_away_from_is_listed_and_can_be_forgotten(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    dialog = app.window.show_settings()
    assert isinstance(dialog, SettingsDialog)
    assert not dialog.saved_servers.isVisible()  # none yet: the row is hidden
    dialog.provider.setCurrentIndex(dialog.provider.findData("openai"))
    dialog.base_url.setText("http://127.0.0.1:1234/v1")
    dialog.save()
    dialog = app.window.show_settings()
    assert isinstance(dialog, SettingsDialog)
    dialog.base_url.setText("http://127.0.0.1:11434")
    dialog.save()
    assert app.host.settings.saved_servers == ("http://127.0.0.1:1234/v1",)

    dialog = app.window.show_settings()
    assert isinstance(dialog, SettingsDialog)
    assert dialog.saved_servers.isVisible()
    assert dialog.saved_server_urls() == ["http://127.0.0.1:1234/v1"]
    assert "Send to several" in dialog.saved_servers.toolTip()
    assert dialog.forget_button.text() == "Forget" and not dialog.forget_button.isEnabled()
    dialog.saved_servers.setCurrentRow(0)
    assert dialog.forget_button.isEnabled()
    dialog.forget_button.click()
    assert dialog.saved_server_urls() == [] and not dialog.forget_button.isEnabled()
    dialog.save()
    assert app.host.settings.saved_servers == ()
    assert orjson.loads((app.root / "settings.json").read_bytes())["savedServers"] == []
