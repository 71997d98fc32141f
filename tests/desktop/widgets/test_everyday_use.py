"""Rough edges of everyday use, seen as a person sees them: the status bar, notices, focus.

The real window offscreen; each test reads the text, tooltip, focus or
colour the user would see.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from helpers.gui import WAIT_MS, App, seed_session
from helpers.serve import serve_process
from pytestqt.qtbot import QtBot

from branchwise.core.conversation.settings import ConversationSettings
from branchwise.core.providers.detect import choose_provider
from branchwise.core.settings import Settings
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.connections import Connection
from branchwise.desktop.widgets.conversation_tab import ConversationTab


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
