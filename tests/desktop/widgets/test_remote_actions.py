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
from PySide6.QtGui import QAction
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


def _menu_action(app: App, server: RemoteServer, session_id: str | None, text: str) -> QAction:
    menu = app.window.remote_servers.context_menu(server, session_id)
    found = [a for a in menu.actions() if a.text() == text]
    assert found, [a.text() for a in menu.actions()]
    return found[0]


def test_create_rename_delete_undo_and_search_on_a_server(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    served_store = SessionStore(served_root)
    sid = seed_session(served_store, ["tell me about pomegranates"], title="Fruit")
    app = make_app()
    seed_session(app.host.store, ["pomegranates at home"], title="Local fruit")
    with serve_process(served_root) as served:
        server = connect(app, served.url, served.token)
        qtbot.waitUntil(lambda: tree_texts(app) == ["workstation", "  Fruit"], timeout=WAIT_MS)

        # New conversation, from the server's own menu: it opens in a tab.
        _menu_action(app, server, None, "New conversation").trigger()
        qtbot.waitUntil(lambda: len(tree_texts(app)) == 3, timeout=WAIT_MS)
        qtbot.waitUntil(
            lambda: isinstance(app.window.tabs.currentWidget(), RemoteConversationTab),
            timeout=WAIT_MS,
        )
        created = current_remote_tab(app).session_id
        assert created != sid and served_store.exists(created)

        # Rename…: the dialog, the server's manifest, the tree and the open tab.
        _menu_action(app, server, created, "Rename…").trigger()
        dialog = app.window.remote_servers.rename_dialog
        assert dialog is not None
        qtbot.waitUntil(dialog.isVisible, timeout=WAIT_MS)
        dialog.setTextValue("Plans  for\nMonday")
        dialog.accept()
        qtbot.waitUntil(lambda: "  Plans for Monday" in tree_texts(app), timeout=WAIT_MS)
        assert served_store.manifest(created).title == "Plans for Monday"
        tabs = app.window.tabs
        qtbot.waitUntil(
            lambda: tabs.tabText(tabs.currentIndex()) == "Plans for Monday", timeout=WAIT_MS
        )
        assert tabs.tabToolTip(tabs.currentIndex()) == "Plans for Monday on workstation"
        # A bad title is refused here, with the same rule as the server's.
        app.window.remote_servers.rename_remote(server, created, "   ")
        qtbot.waitUntil(
            lambda: any(n.code == "invalid_title" for n in app.host.notices.history),
            timeout=WAIT_MS,
        )

        # Delete: the tab closes, the server's Trash holds it, Undo brings it back.
        _menu_action(app, server, created, "Delete").trigger()
        moved = "Moved Plans for Monday to the Trash on workstation."
        qtbot.waitUntil(lambda: moved in app.notice_texts(), timeout=WAIT_MS)
        assert not served_store.exists(created)
        assert app.window.remote_servers.tab_for(server, created) is None
        qtbot.waitUntil(lambda: tree_texts(app) == ["workstation", "  Fruit"], timeout=WAIT_MS)
        notice = next(
            n for n in app.host.notices.history if n.code == "remote_conversation_trashed"
        )
        assert notice.action is not None
        app.window.notice_area.run_action(notice.action)
        qtbot.waitUntil(lambda: "  Plans for Monday" in tree_texts(app), timeout=WAIT_MS)
        assert served_store.exists(created)

        # Search: this machine's hit, then the server's, which opens the server's tab.
        panel = app.window.search_panel
        panel.field.setText("pomegranates")
        qtbot.waitUntil(lambda: len(panel.result_rows()) >= 2, timeout=WAIT_MS)
        titles = [row.title_label.text() for row in panel.result_rows()]
        assert titles[0] == "Local fruit"
        assert "Fruit on workstation" in titles
        remote_row = next(r for r in panel.result_rows() if r.server_name == "workstation")
        assert remote_row.accessibleName().startswith("Fruit on workstation, You: ")
        remote_row.open()
        qtbot.waitUntil(
            lambda: (
                isinstance(app.window.tabs.currentWidget(), RemoteConversationTab)
                and current_remote_tab(app).session_id == sid
            ),
            timeout=WAIT_MS,
        )
        panel.field.clear()


def test_a_disconnected_server_offers_nothing_to_change(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    sid = seed_session(SessionStore(served_root), ["hello"], title="Far")
    app = make_app()
    with serve_process(served_root) as served:
        server = connect(app, served.url, served.token)
        qtbot.waitUntil(lambda: tree_texts(app) == ["workstation", "  Far"], timeout=WAIT_MS)
        assert _menu_action(app, server, sid, "Rename…").isEnabled()
    qtbot.waitUntil(lambda: tree_texts(app)[0] == "workstation (disconnected)", timeout=WAIT_MS)
    for text in ("New conversation", "Rename…", "Delete"):
        assert not _menu_action(app, server, sid, text).isEnabled()
