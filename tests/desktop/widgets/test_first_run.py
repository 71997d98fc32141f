"""First start: a model server that answers is offered; the demo stays until the user accepts."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest
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
from branchwise.desktop.host.notices import Level
from branchwise.desktop.widgets import notice_area
from branchwise.desktop.widgets.notice_area import NoticeRow
from branchwise.desktop.widgets.settings_dialog import SettingsDialog


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
        # Used: the offer leaves the notice area (it stayed, still offering "Use it", before).
        qtbot.waitUntil(lambda: not _offer_rows(app), timeout=WAIT_MS)
        assert _use_it_button(app) is None
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


def _offer_rows(app: App) -> list[NoticeRow]:
    return [r for r in app.window.notice_area.rows() if r.notice.code == "server_found"]


def test_the_offer_waits_for_an_answer_and_is_asked_again_after_a_restart(
    qtbot: QtBot, make_app: Callable[..., App], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notice_area, "OUTCOME_MS", 50)
    app = make_app(provider_factory=choose_provider)
    server = run(qtbot, FakeOpenAIServer(models=["llama3.2"]).start())
    try:
        first_run = FirstRun(app.host, candidates=[server.base_url])
        app.window.first_run = first_run
        run(qtbot, first_run.offer())
        app.host.notices.post("branch_created", Level.SUCCESS, title="x")
        qtbot.waitUntil(lambda: len(app.window.notice_area.rows()) == 1, timeout=WAIT_MS)
        assert _offer_rows(app) and _use_it_button(app) is not None  # the outcome faded
        assert not load_settings(app.root)[0].first_run_done  # not answered yet
        # Quitting without an answer: the next start offers it again.
        again = FirstRun(app.host, candidates=[server.base_url])
        assert run(qtbot, again.offer()) is not None
    finally:
        run(qtbot, server.stop())


def test_a_declined_offer_is_not_asked_again_but_its_history_entry_still_works(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app(provider_factory=choose_provider)
    server = run(qtbot, FakeOpenAIServer(models=["llama3.2"]).start())
    try:
        first_run = FirstRun(app.host, candidates=[server.base_url])
        app.window.first_run = first_run
        run(qtbot, first_run.offer())
        qtbot.waitUntil(lambda: bool(_offer_rows(app)), timeout=WAIT_MS)
        (row,) = _offer_rows(app)
        assert row.dismiss_button.accessibleName() == "Dismiss"
        qtbot.mouseClick(row.dismiss_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not _offer_rows(app), timeout=WAIT_MS)
        assert load_settings(app.root)[0].first_run_done
        assert run(qtbot, FirstRun(app.host, candidates=[server.base_url]).offer()) is None
        # The history keeps the offer; choosing it brings back "Use it", which works.
        area = app.window.notice_area
        area.history_menu.aboutToShow.emit()
        (entry,) = [a for a in area.history_menu.actions() if "llama3.2" in a.text()]
        entry.trigger()
        qtbot.waitUntil(lambda: _use_it_button(app) is not None, timeout=WAIT_MS)
        qtbot.mouseClick(_use_it_button(app), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: isinstance(app.host.provider, OpenAIProvider), timeout=WAIT_MS)
        assert load_settings(app.root)[0].base_url == server.base_url
    finally:
        run(qtbot, server.stop())


def test_settings_detect_local_servers_fills_the_form(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app(provider_factory=choose_provider)
    server = run(qtbot, FakeOpenAIServer(models=["qwen2.5", "llama3.2"]).start())
    try:
        dialog = app.window.show_settings()
        assert isinstance(dialog, SettingsDialog)
        assert dialog.detect_button.text() == "Detect local servers"
        dialog.detect_candidates = [_closed_url()]
        qtbot.mouseClick(dialog.detect_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: "No model server answered" in dialog.models_status.text())
        assert dialog.provider.currentData() == "demo"
        dialog.detect_candidates = [_closed_url(), server.base_url]
        qtbot.mouseClick(dialog.detect_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: dialog.models_status.text().startswith("Found"), timeout=WAIT_MS)
        assert dialog.models_status.text() == f"Found {server.base_url}, offering 2 models."
        assert dialog.provider.currentData() == "openai"
        assert dialog.base_url.text() == server.base_url
        assert [dialog.model.itemText(i) for i in range(dialog.model.count())] == [
            "qwen2.5",
            "llama3.2",
        ]
        dialog.save()
        assert load_settings(app.root)[0].model == "qwen2.5"
    finally:
        run(qtbot, server.stop())
