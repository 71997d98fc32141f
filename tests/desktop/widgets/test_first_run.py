"""First start: a model server that answers is offered; the demo stays until the user accepts."""

from __future__ import annotations

import socket
from collections.abc import Callable

from helpers.fake_openai_server import FakeOpenAIServer
from helpers.gui import WAIT_MS, App, run
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from branchwise.core.providers.demo import DemoProvider
from branchwise.core.providers.detect import choose_provider
from branchwise.core.providers.openai import OpenAIProvider
from branchwise.core.settings import load_settings
from branchwise.desktop.host.first_run import FirstRun


def _closed_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


def _use_it_button(app: App) -> QPushButton | None:
    for button in app.window.findChildren(QPushButton, "noticeAction"):
        if button.isVisible() and button.text() == "Use it":
            return button
    return None


def test_a_detected_server_is_offered_and_used_after_the_click(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app(provider_factory=choose_provider)
    server = run(qtbot, FakeOpenAIServer(models=["llama3.2"]).start())
    try:
        first_run = FirstRun(app.host, candidates=[_closed_url(), server.base_url])
        app.window.first_run = first_run
        assert isinstance(app.host.provider, DemoProvider)
        assert app.window.provider_label.text() == "Demo responder (offline)"
        run(qtbot, first_run.offer())
        qtbot.waitUntil(lambda: _use_it_button(app) is not None, timeout=WAIT_MS)
        assert any(server.base_url in text and "llama3.2" in text for text in app.notice_texts())
        assert isinstance(app.host.provider, DemoProvider)  # nothing switches by itself
        qtbot.mouseClick(_use_it_button(app), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: "llama3.2" in app.window.provider_label.text(), timeout=WAIT_MS)
        assert isinstance(app.host.provider, OpenAIProvider)
        saved, _ = load_settings(app.root)
        assert (saved.base_url, saved.model, saved.first_run_done) == (
            server.base_url,
            "llama3.2",
            True,
        )
        assert not any(r["headers"].get("Authorization") for r in server.requests)
    finally:
        run(qtbot, server.stop())


def test_nothing_answers_keeps_the_demo_and_probes_only_once(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app(provider_factory=choose_provider)
    first_run = FirstRun(app.host, candidates=[_closed_url()])
    assert run(qtbot, first_run.offer()) is None
    assert load_settings(app.root)[0].first_run_done
    assert not [n for n in app.host.notices.history if n.code == "server_found"]
    assert app.window.provider_label.text() == "Demo responder (offline)"
    again = FirstRun(app.host, candidates=["http://unused.invalid/v1"])
    assert run(qtbot, again.offer()) is None  # first_run_done: no second probe
