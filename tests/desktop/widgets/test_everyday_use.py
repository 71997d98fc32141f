"""Rough edges of everyday use, seen as a person sees them: the status bar, notices, focus.

The real window offscreen; each test reads the text, tooltip, focus or
colour the user would see.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from helpers.fake_openai_server import FakeOpenAIServer
from helpers.forking import fork_at
from helpers.gui import WAIT_MS, App, run, seed_session
from helpers.serve import serve_process
from helpers.sessions import complete_turn
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from branchwise.core.conversation.settings import ConversationSettings
from branchwise.core.i18n.reasons import reason_text
from branchwise.core.providers.detect import choose_provider
from branchwise.core.settings import Settings
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.connections import Connection
from branchwise.desktop.widgets.conversation_tab import ConversationTab
from branchwise.desktop.widgets.theme import theme_colors, theme_for

CTRL = Qt.KeyboardModifier.ControlModifier


def _closed_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


def test_the_status_bar_names_the_model_the_conversation_in_front_will_use(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app = make_app(provider_factory=choose_provider)
    url = _closed_url()
    host_port = url.removeprefix("http://").removesuffix("/v1")
    app.host.update_settings(Settings(provider="openai", base_url=url, model="global-model"))
    plain = app.window.open_tab(app.host.create_session().session_id)
    own = app.window.open_tab(app.host.create_session().session_id)
    app.host.configure(own.session_id, ConversationSettings(model="own-model"))
    label = app.window.provider_label
    qtbot.waitUntil(lambda: label.text() == f"own-model @ {host_port}", timeout=WAIT_MS)
    assert "own-model" in label.toolTip()
    app.window.tabs.setCurrentWidget(plain)
    qtbot.waitUntil(lambda: label.text() == f"global-model @ {host_port}", timeout=WAIT_MS)
    app.window.tabs.setCurrentWidget(own)
    qtbot.waitUntil(lambda: label.text() == f"own-model @ {host_port}", timeout=WAIT_MS)

    # A server's conversation is answered by that server's model, not this machine's.
    served_root = tmp_path / "served"
    seed_session(SessionStore(served_root), ["hello"], title="Shared")
    with serve_process(served_root) as served:
        source = app.window.remote_servers.add(
            Connection("workstation", served.url), served.token, timeout=5.0
        )
        qtbot.waitUntil(lambda: source.connected, timeout=WAIT_MS)
        qtbot.waitUntil(lambda: bool(source.listing.newest_first()), timeout=WAIT_MS)
        (session_id,) = [m.session_id for m in source.listing.newest_first()]
        app.host.spawn(app.window.open_remote(source.ref(session_id)), "open")
        qtbot.waitUntil(
            lambda: (
                isinstance(w := app.window.tabs.currentWidget(), ConversationTab) and w.ref.remote
            ),
            timeout=WAIT_MS,
        )
        qtbot.waitUntil(lambda: label.text() == "The model of workstation", timeout=WAIT_MS)
        assert "global-model" not in label.text()


def test_a_successful_retry_settles_the_failed_turn_and_its_notice(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app(provider_factory=choose_provider)
    app.host.update_settings(Settings(provider="openai", base_url=_closed_url(), model="m"))
    app.window.new_conversation()
    tab = app.window.current_tab()
    assert tab is not None
    tab.composer.editor.setPlainText("hello?")
    qtbot.keyClick(tab.composer.editor, Qt.Key.Key_Return)
    failure = reason_text("provider_unreachable")
    qtbot.waitUntil(lambda: any(failure in text for text in app.notice_texts()), timeout=WAIT_MS)
    failed = tab.transcript.turn_widgets()[0]
    qtbot.waitUntil(lambda: failed.retry_button.isVisible(), timeout=WAIT_MS)
    server = run(qtbot, FakeOpenAIServer(models=["m"]).start())
    try:
        app.host.update_settings(Settings(provider="openai", base_url=server.base_url, model="m"))
        qtbot.mouseClick(failed.retry_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: len(tab.transcript.turn_widgets()) == 2, timeout=WAIT_MS)
        qtbot.waitUntil(lambda: not app.host.is_running(tab.session_id), timeout=WAIT_MS)
        # The question was answered: nothing is left to retry, and the red notice goes.
        qtbot.waitUntil(lambda: not failed.retry_button.isVisible(), timeout=WAIT_MS)
        qtbot.waitUntil(
            lambda: not any(failure in text for text in app.notice_texts()), timeout=WAIT_MS
        )
        assert any(failure in text for text in app.window.notice_area.history_texts())
        assert failed.status_label.text().startswith("This turn ended with an error: ")
    finally:
        run(qtbot, server.stop())


def _failing_turn(qtbot: QtBot, app: App, prompt: str) -> ConversationTab:
    tab = app.window.current_tab()
    assert tab is not None
    tab.composer.editor.setPlainText(prompt)
    qtbot.keyClick(tab.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(
        lambda: (
            bool(tab.transcript.turn_widgets())
            and tab.transcript.turn_widgets()[-1].status_label.text().startswith("This turn ended")
        ),
        timeout=WAIT_MS,
    )
    return tab


def test_a_failure_is_red_at_once_and_its_notice_names_the_conversation(
    qtbot: QtBot, make_app: Callable[..., App], qapp: QApplication
) -> None:
    theme_for(qapp).choose("light")
    app = make_app(provider_factory=choose_provider)
    app.host.update_settings(Settings(provider="openai", base_url=_closed_url(), model="m"))
    app.window.new_conversation()
    tab = _failing_turn(qtbot, app, "Plan a trip to Kyoto")
    status = tab.transcript.turn_widgets()[-1].status_label
    error_red = QColor(theme_colors().error_text)
    qtbot.waitUntil(
        lambda: status.palette().color(status.foregroundRole()) == error_red, timeout=WAIT_MS
    )
    # With two conversations failing, each notice says which one.
    app.window.new_conversation()
    _failing_turn(qtbot, app, "Write a haiku")
    failure = reason_text("provider_unreachable")
    qtbot.waitUntil(
        lambda: (
            sorted(t for t in app.notice_texts() if failure in t)
            == sorted([f"Plan a trip to Kyoto: {failure}", f"Write a haiku: {failure}"])
        ),
        timeout=WAIT_MS,
    )


def test_switching_tabs_with_the_keyboard_puts_the_cursor_in_the_message_box(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root = tmp_path / "root"
    store = SessionStore(root)
    with store.create("Trip plans") as writer:
        complete_turn(writer, "r1", "where to?")
        parent = writer.session_id
    child = fork_at(store, parent, "r1", op="op-side").child_session_id
    app = make_app(root=root)
    first = app.window.open_tab(parent)
    branch = app.window.open_tab(child)
    assert branch.banner.open_button.isVisible()
    app.window.activateWindow()
    qtbot.waitUntil(app.window.isActiveWindow, timeout=WAIT_MS)
    for expected in (first, branch, first, branch):
        qtbot.keyClick(app.window.focusWidget() or app.window, Qt.Key.Key_Tab, CTRL)
        assert app.window.current_tab() is expected
        qtbot.waitUntil(lambda t=expected: t.composer.editor.hasFocus(), timeout=WAIT_MS)
        qtbot.keyClicks(app.window.focusWidget(), "x")
        assert expected.composer.editor.toPlainText().endswith("x")  # typed text is kept
