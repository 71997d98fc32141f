"""A server's conversation in the window's one conversation tab: Edit, Regenerate, Retry,
a branch click and Stop, as the user sees them.

A real ``branchwise serve`` subprocess on 127.0.0.1 (its demo responder) and the real
window, offscreen; every outcome is waited for with ``qtbot.waitUntil`` on what is
shown (texts, tooltips, enabled states) and checked in the server's own files.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.forking import children_per_operation
from helpers.gui import BRANCH, WAIT_MS, App, run, seed_session, user_texts
from helpers.serve import serve_process
from pytestqt.qtbot import QtBot

from branchwise.core.projection import events as ev
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.connections import Connection
from branchwise.desktop.host.sources import RemoteSource
from branchwise.desktop.widgets.conversation_tab import ConversationTab

FAST = {"backoff": (0.05, 0.1, 0.2), "refresh_interval": 0.1, "timeout": 5.0}
DISCONNECTED = "Lost the connection to workstation. Reconnecting…"


def _connect(qtbot: QtBot, app: App, url: str, token: str) -> RemoteSource:
    server = app.window.remote_servers.add(Connection("workstation", url), token, **FAST)
    qtbot.waitUntil(lambda: server.connected, timeout=WAIT_MS)
    return server


def _open(qtbot: QtBot, app: App, server: RemoteSource, sid: str, turns: int) -> ConversationTab:
    tab = run(qtbot, app.window.remote_servers.open_remote(server, sid))
    assert isinstance(tab, ConversationTab) and tab.ref.remote
    qtbot.waitUntil(lambda: len(tab.turn_widgets()) == turns, timeout=WAIT_MS)
    return tab


def _front(app: App) -> ConversationTab:
    tab = app.window.current_tab()
    assert tab is not None
    return tab


def _answered(tab: ConversationTab, turns: int) -> bool:
    widgets = tab.turn_widgets()
    return len(widgets) == turns and widgets[-1].row.end_reason == "completed"


def test_edit_and_regenerate_branch_on_the_server_and_are_answered_there(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    served = SessionStore(served_root)
    sid = seed_session(served, ["first question", "second question"], title="Plans")
    app = make_app()
    with serve_process(served_root) as process:
        server = _connect(qtbot, app, process.url, process.token)
        tab = _open(qtbot, app, server, sid, 2)
        first, second = tab.turn_widgets()
        qtbot.waitUntil(second.edit_button.isEnabled, timeout=WAIT_MS)
        assert second.edit_button.toolTip() == "Edit this prompt and send it as a branch"
        assert second.regenerate_button.isEnabled()

        # Edit: the same in-place editor; the branch is made on the server, opens in a
        # new tab of the same kind, and the server answers the edited prompt there.
        second.edit_button.click()
        second.edit_text.setPlainText("second question, but in French")
        second.send_as_branch_button.click()
        qtbot.waitUntil(lambda: _front(app) is not tab, timeout=WAIT_MS)
        edited = _front(app)
        assert edited.ref.server == process.url and edited.session_id != sid
        qtbot.waitUntil(lambda: _answered(edited, 2), timeout=WAIT_MS)
        assert user_texts(edited.turn_widgets()) == [
            "first question",
            "second question, but in French",
        ]
        assert "second question, but in French" in edited.turn_widgets()[-1].answer_text()
        tabs = app.window.tabs
        # the server's listing carries the label's structure: rendered here, never elided
        label = "Edited: second question, but in French"
        assert tabs.tabText(tabs.indexOf(edited)) == f"Plans (branch 1) · {label}"
        tip = tabs.tabToolTip(tabs.indexOf(edited)).splitlines()
        assert tip[:2] == ["Plans (branch 1)", label]
        assert tip[2].startswith("Branched from turn 2 of Plans on ")
        assert tip[2].endswith(" on workstation")
        manifest = served.manifest(edited.session_id)
        assert manifest.parent is not None and manifest.parent.origin is not None
        assert manifest.parent.origin.kind == "edit"

        # Regenerate the first turn: a fork at the start, on the server, asked there too.
        tabs.setCurrentWidget(tab)
        first.regenerate_button.click()
        qtbot.waitUntil(lambda: _front(app) not in (tab, edited), timeout=WAIT_MS)
        regenerated = _front(app)
        qtbot.waitUntil(lambda: _answered(regenerated, 1), timeout=WAIT_MS)
        assert user_texts(regenerated.turn_widgets()) == ["first question"]
        origin = served.manifest(regenerated.session_id).parent
        assert origin is not None and origin.origin is not None
        assert origin.origin.kind == "regenerate" and origin.turn_id is None

        # Each click made exactly one child, and the journal holds nothing pending.
        assert children_per_operation(served).total() == 2
        assert server.coordinator.records() == ()
        # The parent's turns list their branches as a local turn does.
        qtbot.waitUntil(lambda: second.branches_button.isVisibleTo(tab), timeout=WAIT_MS)
        listed = [a.text() for a in second.branches_button.menu().actions() if a.text()]
        assert listed[0] == "Edited: second question, but in French · Plans (branch 1)"
        # Compare needs both logs on this machine: offered disabled, saying why.
        refused = [a for a in listed if a == "Compare with…"]
        assert refused == ["Compare with…"]
        for closing in (regenerated, edited, tab):
            tabs.tabCloseRequested.emit(tabs.indexOf(closing))
        assert app.window.remote_servers.remote_tabs() == []


def test_retry_branch_and_stop_in_a_server_tab_and_a_lost_server_disables_them(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    served = SessionStore(served_root)
    with served.create("Flaky") as writer:
        writer.commit([ev.turn_start("t_fail"), ev.user_message("u_fail", "are you there?")])
        writer.commit([ev.turn_end("t_fail", ev.EndReason.ERROR, "server said 500")])
        sid = writer.session_id
    app = make_app()
    with serve_process(served_root, args=["--delay-ms", "20"]) as process:
        server = _connect(qtbot, app, process.url, process.token)
        tab = _open(qtbot, app, server, sid, 1)
        (failed,) = tab.turn_widgets()
        assert failed.retry_button.isVisibleTo(tab) and failed.retry_button.isEnabled()
        assert "server said 500" in failed.status_label.text()

        # Retry asks the failed prompt again below it, on the server.
        failed.retry_button.click()
        qtbot.waitUntil(lambda: _answered(tab, 2), timeout=WAIT_MS)
        assert user_texts(tab.turn_widgets()) == ["are you there?", "are you there?"]
        assert len(served.read(sid).projection.turns) == 2

        # A branch click from the answered turn opens the child in another tab.
        answered = tab.turn_widgets()[1]
        qtbot.waitUntil(answered.branch_button.isEnabled, timeout=WAIT_MS)
        assert answered.branch_button.toolTip() == BRANCH
        answered.branch_button.click()
        qtbot.waitUntil(lambda: _front(app) is not tab, timeout=WAIT_MS)
        child = _front(app)
        qtbot.waitUntil(lambda: len(child.turn_widgets()) == 2, timeout=WAIT_MS)
        assert children_per_operation(served).total() == 1

        # Stop ends a running server turn as cancelled; the tab says so.
        app.window.tabs.setCurrentWidget(tab)
        tab.composer.editor.setPlainText("a long question " * 20)
        tab.composer.send_button.click()
        qtbot.waitUntil(tab.composer.stop_button.isEnabled, timeout=WAIT_MS)
        qtbot.waitUntil(app.window.stop_action.isEnabled, timeout=WAIT_MS)
        app.window.stop_action.trigger()
        qtbot.waitUntil(
            lambda: (
                len(tab.turn_widgets()) == 3 and tab.turn_widgets()[2].row.end_reason == "cancelled"
            ),
            timeout=WAIT_MS,
        )
        qtbot.waitUntil(lambda: not tab.composer.stop_button.isEnabled(), timeout=WAIT_MS)

    # The server is gone: sending and asking again are disabled, each saying why.
    qtbot.waitUntil(lambda: not server.connected, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: tab.state_label.text() == DISCONNECTED, timeout=WAIT_MS)
    assert tab.composer.editor.isReadOnly() or not tab.composer.send_button.isEnabled()
    widget = tab.turn_widgets()[1]
    qtbot.waitUntil(lambda: not widget.regenerate_button.isEnabled(), timeout=WAIT_MS)
    assert widget.regenerate_button.toolTip() == DISCONNECTED
    assert not tab.turn_widgets()[0].retry_button.isEnabled()
    assert tab.turn_widgets()[0].retry_button.toolTip() == DISCONNECTED
    run(qtbot, server.stop())
