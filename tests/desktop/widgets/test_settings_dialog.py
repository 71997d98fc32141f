"""The settings dialog as a person uses it: the demo pace, errors, the shortcut, the models."""

from __future__ import annotations

from collections.abc import Callable

import orjson
from helpers.gui import App
from pytestqt.qtbot import QtBot

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
