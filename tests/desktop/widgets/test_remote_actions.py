"""What a desktop does with a server's conversations beyond reading them: busy, manage, restore.

A real ``branchwise serve`` subprocess on 127.0.0.1 and the real window,
offscreen; tests read the tree, tabs and notices the user sees.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from helpers.gui import WAIT_MS, App, run, seed_session
from helpers.serve import serve_process
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QTreeWidgetItem
from pytestqt.qtbot import QtBot

from branchwise.core.store.store import SessionStore
from branchwise.core.store.trash import Trash
from branchwise.desktop.host.connections import Connection, load_connections, read_token
from branchwise.desktop.host.sources import RemoteSource
from branchwise.desktop.host.window_state import RemoteTab, load_window_state
from branchwise.desktop.widgets.conversation_tab import ConversationTab


def _is_remote_tab(widget: object) -> bool:
    return isinstance(widget, ConversationTab) and widget.ref.remote


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


def current_remote_tab(app: App) -> ConversationTab:
    widget = app.window.tabs.currentWidget()
    assert isinstance(widget, ConversationTab) and widget.ref.remote, widget
    return widget


def connect(app: App, url: str, token: str) -> RemoteSource:
    return app.window.remote_servers.add(Connection("workstation", url), token, **FAST)


def open_remote(qtbot: QtBot, app: App, title: str) -> ConversationTab:
    app.window.remote_servers._activated(item_named(app, title))
    qtbot.waitUntil(
        lambda: _is_remote_tab(app.window.tabs.currentWidget()),
        timeout=WAIT_MS,
    )
    return current_remote_tab(app)


def test_a_remote_tab_has_the_local_composer(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    seed_session(SessionStore(served_root), ["hello"], title="Shared")
    app = make_app()
    local = app.window.open_tab(app.host.create_session().session_id)
    with serve_process(served_root) as served:
        connect(app, served.url, served.token)
        qtbot.waitUntil(lambda: tree_texts(app) == ["workstation", "  Shared"], timeout=WAIT_MS)
        tab = open_remote(qtbot, app, "Shared")
        qtbot.waitUntil(lambda: len(tab.turn_widgets()) == 1, timeout=WAIT_MS)
        composer = tab.composer
        assert composer.editor.placeholderText() == local.composer.editor.placeholderText()
        assert composer.editor.placeholderText().startswith("Type a message…")
        assert not composer.send_button.isEnabled()  # nothing written: nothing to send
        composer.editor.setPlainText("   ")
        assert not composer.send_button.isEnabled()
        composer.editor.setPlainText("hello again")
        assert composer.send_button.isEnabled()
        composer.editor.clear()
        assert not composer.send_button.isEnabled()


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
        with served_store.open_writer(sid):  # another app writes it on the server's machine
            tab.composer.editor.setPlainText("are you there?")
            qtbot.waitUntil(tab.composer.send_button.isEnabled, timeout=WAIT_MS)
            tab.composer.send_button.click()
            qtbot.waitUntil(lambda: BUSY in app.notice_texts(), timeout=WAIT_MS)
            assert len(served_store.read(sid).projection.turns) == 1
        tab.composer.editor.setPlainText("are you there?")
        qtbot.waitUntil(tab.composer.send_button.isEnabled, timeout=WAIT_MS)
        tab.composer.send_button.click()
        qtbot.waitUntil(
            lambda: (
                len(tab.turn_widgets()) == 2 and tab.turn_widgets()[1].row.end_reason == "completed"
            ),
            timeout=WAIT_MS,
        )


def _menu_action(app: App, server: RemoteSource, session_id: str | None, text: str) -> QAction:
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
            lambda: _is_remote_tab(app.window.tabs.currentWidget()),
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
                _is_remote_tab(app.window.tabs.currentWidget())
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


def _reconnect_saved(app: App) -> None:
    """What the app does at start, with short delays: saved servers, then last time's tabs."""
    for connection in load_connections(app.root):
        app.window.remote_servers.add(connection, read_token(app.root, connection), **FAST)
    state = load_window_state(app.root)
    assert state is not None
    app.window.restore_state(state)


def _save_connection(qtbot: QtBot, app: App, url: str, token: str) -> RemoteSource:
    app.window.remote_servers.dialog = None
    app.window.remote_servers.connect_action.trigger()
    dialog = app.window.remote_servers.dialog
    assert dialog is not None
    dialog.name_edit.setText("workstation")
    dialog.url_edit.setText(url)
    dialog.token_edit.setText(token)
    dialog.accept()  # saved once the server has taken the token
    qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=WAIT_MS)
    return app.window.remote_servers.servers[-1]


def test_server_tabs_come_back_after_a_restart(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    sid = seed_session(SessionStore(served_root), ["hello"], title="Far")
    before = make_app()
    local = seed_session(before.host.store, ["here"], title="Near")
    with serve_process(served_root) as served:
        _save_connection(qtbot, before, served.url, served.token)
        qtbot.waitUntil(lambda: tree_texts(before) == ["workstation", "  Far"], timeout=WAIT_MS)
        before.window.open_session(local)
        open_remote(qtbot, before, "Far")
        qtbot.waitUntil(
            lambda: (
                (s := load_window_state(before.root)) is not None
                and s.remote_tabs == (RemoteTab(served.url, sid, "Far"),)
                and s.current_remote == RemoteTab(served.url, sid, "Far")
            ),
            timeout=WAIT_MS,
        )
        run(qtbot, before.host.shutdown())

        after = make_app(root=before.root)
        _reconnect_saved(after)
        tabs = after.window.tabs
        assert [tabs.tabText(i) for i in range(tabs.count())] == ["Near", "Far"]
        qtbot.waitUntil(lambda: _is_remote_tab(tabs.widget(1)), timeout=WAIT_MS)
        tab = tabs.widget(1)
        assert _is_remote_tab(tab) and tab.session_id == sid
        assert tabs.currentWidget() is tab
        qtbot.waitUntil(lambda: len(tab.turn_widgets()) == 1, timeout=WAIT_MS)
        assert after.window.remote_servers.waiting_tabs() == []


def test_a_server_tab_waits_with_a_notice_until_its_server_answers(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    served_store = SessionStore(served_root)
    sid = seed_session(served_store, ["hello"], title="Far")
    gone = seed_session(served_store, ["bye"], title="Gone")
    before = make_app()
    with serve_process(served_root) as served:
        port = urlsplit(served.url).port
        _save_connection(qtbot, before, served.url, served.token)
        qtbot.waitUntil(lambda: len(tree_texts(before)) == 3, timeout=WAIT_MS)
        open_remote(qtbot, before, "Far")
        open_remote(qtbot, before, "Gone")
        qtbot.waitUntil(
            lambda: (s := load_window_state(before.root)) is not None and len(s.remote_tabs) == 2,
            timeout=WAIT_MS,
        )
        run(qtbot, before.host.shutdown())
    Trash(served_store).trash(gone)  # deleted on the server while this desktop was away

    after = make_app(root=before.root)
    _reconnect_saved(after)
    servers = after.window.remote_servers
    waiting = servers.waiting_tabs()
    assert [w.title for w in waiting] == ["Far", "Gone"]
    away = "workstation does not answer. This conversation opens when it does."
    qtbot.waitUntil(lambda: waiting[0].message_label.text() == away, timeout=WAIT_MS)
    assert waiting[0].accessibleName() == away

    with serve_process(served_root, port=port or 0):
        qtbot.waitUntil(lambda: len(servers.remote_tabs()) == 1, timeout=WAIT_MS)
        assert servers.remote_tabs()[0].session_id == sid
        [still] = servers.waiting_tabs()
        qtbot.waitUntil(
            lambda: still.message_label.text().startswith(
                "workstation could not open this conversation: "
            ),
            timeout=WAIT_MS,
        )
        tabs = after.window.tabs
        assert [tabs.tabText(i) for i in range(tabs.count())] == ["Far", "Gone"]
        tabs.tabCloseRequested.emit(tabs.indexOf(still))
        assert servers.waiting_tabs() == []
        qtbot.waitUntil(
            lambda: (
                (s := load_window_state(after.root)) is not None
                and [t.session_id for t in s.remote_tabs] == [sid]
            ),
            timeout=WAIT_MS,
        )
        run(qtbot, servers.servers[0].stop())
