"""What a desktop does with a server's conversations beyond reading them: busy, manage, restore.

A real ``branchwise serve`` subprocess on 127.0.0.1 and the real window,
offscreen; tests read the tree, tabs and notices the user sees.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.gui import WAIT_MS, App, seed_session
from helpers.serve import serve_process
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QTreeWidgetItem
from pytestqt.qtbot import QtBot

from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.remote import Connection, RemoteServer
from branchwise.desktop.widgets.remote_servers import RemoteConversationTab

FAST = {"backoff": (0.05, 0.1, 0.2), "refresh_interval": 0.1, "timeout": 5.0}
BUSY = "Another app is writing to this conversation on workstation. Try again in a moment."


def tree_texts(app: App) -> list[str]:
    """Every line of the server section, indented by depth."""
    tree = app.window.remote_servers.tree
    lines: list[str] = []
    pending = [(tree.topLevelItem(i), 0) for i in reversed(range(tree.topLevelItemCount()))]
    while pending:
        item, depth = pending.pop()
        lines.append("  " * depth + item.text(0))
        pending.extend((item.child(i), depth + 1) for i in reversed(range(item.childCount())))
    return lines


def item_named(app: App, text: str) -> QTreeWidgetItem:
    found = app.window.remote_servers.tree.findItems(text, Qt.MatchFlag.MatchRecursive)
    assert found, (text, tree_texts(app))
    return found[0]


def current_remote_tab(app: App) -> RemoteConversationTab:
    widget = app.window.tabs.currentWidget()
    assert isinstance(widget, RemoteConversationTab), widget
    return widget


def connect(app: App, url: str, token: str) -> RemoteServer:
    return app.window.remote_servers.add(Connection("workstation", url), token, **FAST)


def open_remote(qtbot: QtBot, app: App, title: str) -> RemoteConversationTab:
    app.window.remote_servers._activated(item_named(app, title))
    qtbot.waitUntil(
        lambda: isinstance(app.window.tabs.currentWidget(), RemoteConversationTab),
        timeout=WAIT_MS,
    )
    return current_remote_tab(app)


def test_a_conversation_written_elsewhere_says_busy_and_a_retry_works(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    served_store = SessionStore(served_root)
    sid = seed_session(served_store, ["hello"], title="Shared")
    app = make_app()
    with serve_process(served_root) as served:
        connect(app, served.url, served.token)
        qtbot.waitUntil(lambda: tree_texts(app) == ["workstation", "  Shared"], timeout=WAIT_MS)
        tab = open_remote(qtbot, app, "Shared")
        qtbot.waitUntil(lambda: len(tab.turn_widgets()) == 1, timeout=WAIT_MS)
        qtbot.waitUntil(tab.send_button.isEnabled, timeout=WAIT_MS)
        with served_store.open_writer(sid):  # another app writes it on the server's machine
            tab.editor.setPlainText("are you there?")
            tab.send_button.click()
            qtbot.waitUntil(lambda: BUSY in app.notice_texts(), timeout=WAIT_MS)
            assert len(served_store.read(sid).projection.turns) == 1
        qtbot.waitUntil(tab.send_button.isEnabled, timeout=WAIT_MS)
        tab.editor.setPlainText("are you there?")
        tab.send_button.click()
        qtbot.waitUntil(
            lambda: (
                len(tab.turn_widgets()) == 2 and tab.turn_widgets()[1].row.end_reason == "completed"
            ),
            timeout=WAIT_MS,
        )
