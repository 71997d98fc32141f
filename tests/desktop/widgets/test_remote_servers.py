"""Connect to a real ``branchwise serve``, list, open, branch; an unsupported and a lost server.

The server is a real subprocess on 127.0.0.1; the window is the real one,
offscreen. Tests read what the user sees (tree texts, tooltips, notices) and
wait with ``qtbot.waitUntil``.
"""

from __future__ import annotations

import os
import signal
import stat
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import orjson
from helpers.forking import children_per_operation, make_source
from helpers.gui import BRANCH, WAIT_MS, App, run, seed_long_session, seed_session, user_texts
from helpers.serve import serve_process, server_without_capabilities
from helpers.sessions import commits_of
from PySide6.QtWidgets import QLineEdit, QTreeWidgetItem
from pytestqt.qtbot import QtBot

from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.connections import TOKENS_DIR, Connection
from branchwise.desktop.host.rows import PAGE_SIZE
from branchwise.desktop.host.sources import RemoteConversation
from branchwise.desktop.widgets.conversation_tab import ConversationTab


def _is_remote_tab(widget: object) -> bool:
    return isinstance(widget, ConversationTab) and widget.ref.remote


FAST = {"backoff": (0.05, 0.1, 0.2), "refresh_interval": 0.1, "timeout": 5.0}
UNSUPPORTED = "This server does not support branching conversations."
UNSUPPORTED_ASK_AGAIN = "This server cannot branch an edited or regenerated prompt."
SERVER_CANNOT = "A conversation kept on a server cannot do this from here."


def _tree_texts(app: App) -> list[str]:
    """Every line of the server section, indented by depth."""
    tree = app.window.remote_servers.tree
    lines: list[str] = []

    def walk(item: QTreeWidgetItem, depth: int) -> None:
        lines.append("  " * depth + item.text(0))
        for index in range(item.childCount()):
            walk(item.child(index), depth + 1)

    for index in range(tree.topLevelItemCount()):
        walk(tree.topLevelItem(index), 0)
    return lines


def _item(app: App, text: str) -> QTreeWidgetItem:
    tree = app.window.remote_servers.tree
    found = tree.findItems(text, __import__("PySide6.QtCore").QtCore.Qt.MatchFlag.MatchRecursive)
    assert found, (text, _tree_texts(app))
    return found[0]


def _remote_tab(app: App) -> ConversationTab:
    widget = app.window.tabs.currentWidget()
    assert isinstance(widget, ConversationTab) and widget.ref.remote, widget
    return widget


def test_connect_list_open_and_branch_on_a_server(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    served_store = SessionStore(served_root)
    sid = seed_session(served_store, ["what is a fork?", "and a branch?"], title="Lab notes")
    app = make_app()
    with serve_process(served_root, args=["--delay-ms", "20"]) as served:
        app.window.remote_servers.connect_action.trigger()
        dialog = app.window.remote_servers.dialog
        assert dialog is not None and dialog.isVisible()
        assert dialog.token_edit.echoMode() == QLineEdit.EchoMode.Password
        dialog.name_edit.setText("workstation")
        dialog.url_edit.setText(served.url)
        dialog.token_edit.setText(served.token)
        dialog.accept()
        qtbot.waitUntil(lambda: _tree_texts(app) == ["workstation", "  Lab notes"], timeout=WAIT_MS)
        saved = orjson.loads((app.root / "servers.json").read_bytes())
        assert saved["servers"] == [{"name": "workstation", "url": served.url}]
        assert served.token not in (app.root / "servers.json").read_text()
        [token_file] = (app.root / TOKENS_DIR).iterdir()
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600

        app.window.remote_servers._activated(_item(app, "Lab notes"))
        qtbot.waitUntil(
            lambda: _is_remote_tab(app.window.tabs.currentWidget()),
            timeout=WAIT_MS,
        )
        tab = _remote_tab(app)
        assert app.window.tabs.tabText(app.window.tabs.currentIndex()) == "Lab notes"
        qtbot.waitUntil(
            lambda: (
                len(tab.turn_widgets()) == 2
                and all(w.branch_button.isEnabled() for w in tab.turn_widgets())
            ),
            timeout=WAIT_MS,
        )
        first = tab.turn_widgets()[0]
        assert first.branch_button.toolTip() == BRANCH
        assert "what is a fork?" in first.row.entries[0].content

        first.branch_button.click()
        qtbot.waitUntil(lambda: _remote_tab(app) is not tab, timeout=WAIT_MS)
        child_tab = _remote_tab(app)
        qtbot.waitUntil(lambda: len(child_tab.turn_widgets()) == 1, timeout=WAIT_MS)
        assert child_tab.session_id != sid
        assert children_per_operation(served_store).total() == 1
        qtbot.waitUntil(lambda: len(_tree_texts(app)) == 3, timeout=WAIT_MS)
        assert _tree_texts(app)[:2] == ["workstation", "  Lab notes"]
        # nested, named and labelled as local ones
        assert _tree_texts(app)[2] == "    Lab notes (branch 1) · From turn 1"
        tabs = app.window.tabs
        assert tabs.tabText(tabs.indexOf(child_tab)) == "Lab notes (branch 1) · From turn 1"
        server = app.window.remote_servers.servers[0]
        assert server.coordinator.records() == ()
        # The parent's turn lists its branch in the same menu a local turn has, and opens it.
        assert not tab.turn_widgets()[1].branches_button.isVisible()
        qtbot.waitUntil(
            lambda: tab.turn_widgets()[0].branches_button.isVisibleTo(tab), timeout=WAIT_MS
        )
        [listed] = [a for a in tab.turn_widgets()[0].branches_button.menu().actions() if a.text()][
            :1
        ]
        assert "Lab notes (branch 1)" in listed.text()
        tabs.setCurrentWidget(tab)
        listed.trigger()
        qtbot.waitUntil(lambda: tabs.currentWidget() is child_tab, timeout=WAIT_MS)

        # A prompt sent from the remote composer runs on the server and streams in.
        child_tab.composer.editor.setPlainText("one more")
        child_tab.composer.send_button.click()
        qtbot.waitUntil(lambda: len(child_tab.turn_widgets()) == 2, timeout=WAIT_MS)
        qtbot.waitUntil(
            lambda: child_tab.turn_widgets()[1].row.end_reason == "completed", timeout=WAIT_MS
        )
        assert len(served_store.read(child_tab.session_id).projection.turns) == 2
        assert not child_tab.composer.stop_button.isEnabled()
        # Stop, while the server runs the next turn, ends it as cancelled.
        child_tab.composer.editor.setPlainText("and another")
        child_tab.composer.send_button.click()
        qtbot.waitUntil(child_tab.composer.stop_button.isEnabled, timeout=WAIT_MS)
        child_tab.composer.stop_button.click()
        qtbot.waitUntil(
            lambda: (
                len(child_tab.turn_widgets()) == 3
                and child_tab.turn_widgets()[2].row.end_reason == "cancelled"
            ),
            timeout=WAIT_MS,
        )
        qtbot.waitUntil(lambda: not child_tab.composer.stop_button.isEnabled(), timeout=WAIT_MS)
        for tab_widget in app.window.remote_servers.remote_tabs():
            app.window.tabs.tabCloseRequested.emit(app.window.tabs.indexOf(tab_widget))
        assert app.window.remote_servers.remote_tabs() == []


def test_a_server_without_fork_targets_shows_server_unsupported(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["local only"])
    context = server_without_capabilities(commits_of(app.host.store, sid))
    url = run(qtbot, context.__aenter__())
    try:
        servers = app.window.remote_servers
        server = servers.add(Connection("old box", url), "token", **FAST)
        qtbot.waitUntil(lambda: _tree_texts(app) == ["old box"], timeout=WAIT_MS)
        qtbot.waitUntil(lambda: UNSUPPORTED in app.notice_texts(), timeout=WAIT_MS)
        tab = run(qtbot, servers.open_remote(server, sid))
        qtbot.waitUntil(lambda: len(tab.turn_widgets()) == 1, timeout=WAIT_MS)
        [widget] = tab.turn_widgets()
        assert not widget.branch_button.isEnabled()
        assert widget.branch_button.toolTip() == UNSUPPORTED
        # Edit and Regenerate branch too: shown disabled, saying why; Retry is not offered.
        for button in (widget.edit_button, widget.regenerate_button):
            assert button.isVisibleTo(tab) and not button.isEnabled()
            assert button.toolTip() == UNSUPPORTED_ASK_AGAIN
        # What has no route on a server is disabled with the reason, never a silent no-op.
        assert not app.window.export_action.isEnabled()
        assert app.window.export_action.toolTip() == SERVER_CANNOT
        assert not app.window.conversation_settings_action.isEnabled()
        assert app.window.conversation_settings_action.toolTip() == SERVER_CANNOT
        tabs = app.window.tabs
        assert tabs.tabToolTip(tabs.indexOf(tab)) == "local only on old box"
        assert tab.state_label.text() == "On the server old box"
        run(qtbot, app.host.close(tab.ref))
    finally:
        run(qtbot, context.__aexit__(None, None, None))


def test_a_lost_server_is_reported_and_reconnected(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    seed_session(SessionStore(served_root), ["hello"], title="Far away")
    app = make_app()
    with serve_process(served_root) as served:
        port = urlsplit(served.url).port
        servers = app.window.remote_servers
        servers.add(Connection("workstation", served.url), served.token, **FAST)
        qtbot.waitUntil(lambda: _tree_texts(app) == ["workstation", "  Far away"], timeout=WAIT_MS)
        os.kill(served.pid, signal.SIGKILL)
        qtbot.waitUntil(
            lambda: "Lost the connection to workstation. Reconnecting…" in app.notice_texts(),
            timeout=WAIT_MS,
        )
        qtbot.waitUntil(
            lambda: _tree_texts(app)[0] == "workstation (disconnected)", timeout=WAIT_MS
        )
    with serve_process(served_root, port=port or 0):
        qtbot.waitUntil(
            lambda: "Connected to workstation again." in app.notice_texts(), timeout=WAIT_MS
        )
        qtbot.waitUntil(lambda: _tree_texts(app) == ["workstation", "  Far away"], timeout=WAIT_MS)
        run(qtbot, servers.servers[0].stop())


def test_a_long_remote_conversation_shows_its_last_page_then_earlier_ones(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    source = make_source(SessionStore(served_root), turns=120, title="long")
    app = make_app()
    with serve_process(served_root) as served:
        servers = app.window.remote_servers
        server = servers.add(Connection("workstation", served.url), served.token, **FAST)
        qtbot.waitUntil(lambda: _tree_texts(app) == ["workstation", "  long"], timeout=WAIT_MS)
        tab = run(qtbot, servers.open_remote(server, source.session_id))
        # The local transcript's paging: the last page first, built a few rows at a time.
        qtbot.waitUntil(lambda: len(tab.turn_widgets()) == 50, timeout=WAIT_MS)
        assert [w.row.index for w in tab.turn_widgets()][:1] == [71]
        earlier = tab.transcript.earlier_button
        assert earlier.isVisibleTo(tab)
        assert earlier.text() == "Show earlier turns (70 more)"
        earlier.click()
        qtbot.waitUntil(lambda: len(tab.turn_widgets()) == 100, timeout=WAIT_MS)
        assert [w.row.index for w in tab.turn_widgets()][:1] == [21]
        earlier.click()
        qtbot.waitUntil(lambda: len(tab.turn_widgets()) == 120, timeout=WAIT_MS)
        assert not earlier.isVisibleTo(tab)
        run(qtbot, server.stop())


def test_a_big_server_conversation_shows_working_branches_before_its_whole_history(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    turns = 2000
    served_root = tmp_path / "served"
    served_store = SessionStore(served_root)
    sid = seed_long_session(served_store, turns, title="Big")
    every_commit = len(commits_of(served_store, sid))
    app = make_app()
    with serve_process(served_root) as served:
        servers = app.window.remote_servers
        server = servers.add(Connection("workstation", served.url), served.token, **FAST)
        qtbot.waitUntil(lambda: _tree_texts(app) == ["workstation", "  Big"], timeout=WAIT_MS)
        servers._activated(_item(app, "Big"))
        qtbot.waitUntil(lambda: _is_remote_tab(app.window.tabs.currentWidget()), timeout=WAIT_MS)
        tab = _remote_tab(app)
        qtbot.waitUntil(
            lambda: (
                len(tab.turn_widgets()) == PAGE_SIZE
                and all(w.branch_button.isEnabled() for w in tab.turn_widgets())
            ),
            timeout=WAIT_MS,
        )
        conversation = app.host.conversation(tab.ref)
        assert isinstance(conversation, RemoteConversation)
        # Only the last page came from the server: about one commit per turn shown.
        assert conversation.commits_fetched <= PAGE_SIZE + 1 < every_commit
        widgets = tab.turn_widgets()
        assert user_texts(widgets)[0] == f"Question number {turns - PAGE_SIZE + 1}?"
        assert widgets[-1].number_label.text() == "Turn 2,000"
        assert widgets[-1].branch_button.toolTip() == BRANCH
        earlier = tab.transcript.earlier_button
        assert earlier.isVisibleTo(tab)
        assert earlier.text() == "Show earlier turns (1,950 more)"

        # A shown turn branches on the server, with the history still unread.
        widgets[-2].branch_button.click()
        qtbot.waitUntil(lambda: _remote_tab(app) is not tab, timeout=WAIT_MS)
        child_tab = _remote_tab(app)
        qtbot.waitUntil(lambda: len(child_tab.turn_widgets()) == PAGE_SIZE, timeout=WAIT_MS)
        assert user_texts(child_tab.turn_widgets())[-1] == f"Question number {turns - 1}?"
        assert children_per_operation(served_store).total() == 1
        assert conversation.commits_fetched < every_commit

        # Scrolling up reads the earlier history and shows the page before.
        app.window.tabs.setCurrentWidget(tab)
        bar = tab.transcript.verticalScrollBar()
        qtbot.waitUntil(lambda: bar.maximum() > 0, timeout=WAIT_MS)
        bar.setValue(bar.minimum())
        qtbot.waitUntil(lambda: len(tab.turn_widgets()) == 2 * PAGE_SIZE, timeout=WAIT_MS)
        assert conversation.commits_fetched >= every_commit
        shown = tab.turn_widgets()
        assert user_texts(shown)[0] == f"Question number {turns - 2 * PAGE_SIZE + 1}?"
        assert shown[0].number_label.text() == "Turn 1,901"
        qtbot.waitUntil(lambda: all(w.branch_button.isEnabled() for w in shown), timeout=WAIT_MS)
        assert earlier.text() == "Show earlier turns (1,900 more)"
        run(qtbot, server.stop())
