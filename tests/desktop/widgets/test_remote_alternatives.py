"""Alternatives at a turn on a ``branchwise serve`` server: the same ``< k/n >``, the same switch.

A real server subprocess over a real data folder; the family is the one the
local tests use (test_alternatives.py): the server's conversation list is all
the desktop needs to know the sets, and the switch opens the other
alternative in the same tab, at the same turn.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.alternatives import counter_of, landed_number, make_family
from helpers.gui import WAIT_MS, App
from helpers.serve import serve_process
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.connections import Connection
from branchwise.desktop.widgets.conversation_tab import ConversationTab
from branchwise.desktop.widgets.turn_widget import TurnWidget

FAST = {"backoff": (0.05, 0.1, 0.2), "refresh_interval": 0.1, "timeout": 5.0}


def listed(app: App) -> int:
    """How many lines the server section shows (the server and its conversations)."""
    tree = app.window.remote_servers.tree
    pending = [tree.topLevelItem(i) for i in range(tree.topLevelItemCount())]
    count = 0
    while pending:
        item = pending.pop()
        count += 1
        pending.extend(item.child(i) for i in range(item.childCount()))
    return count


def remote_turn(tab: ConversationTab, number: int) -> TurnWidget | None:
    return next((w for w in tab.turn_widgets() if w.row.index == number), None)


def test_a_servers_alternatives_switch_in_place(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    family = make_family(SessionStore(served_root))
    app = make_app()
    with serve_process(served_root) as served:
        app.window.remote_servers.add(Connection("workstation", served.url), served.token, **FAST)
        qtbot.waitUntil(lambda: listed(app) == 4, timeout=WAIT_MS)
        tree = app.window.remote_servers.tree
        app.window.remote_servers._activated(tree.findItems("Trip", Qt.MatchFlag.MatchRecursive)[0])
        qtbot.waitUntil(lambda: app.window.current_tab() is not None, timeout=WAIT_MS)
        tab = app.window.current_tab()
        assert tab is not None and tab.ref.remote and tab.session_id == family.root
        qtbot.waitUntil(lambda: counter_of(remote_turn(tab, 2)) == "1/3", timeout=WAIT_MS)
        widget = remote_turn(tab, 2)
        assert widget is not None
        tip = widget.alternatives.counter.toolTip().splitlines()
        assert tip == [
            "Alternative 1 of 3 at this turn",
            "1. Trip",
            "2. From turn 1",
            "3. Edited: Where to stay cheaply?",
        ]
        tabs_before = app.window.tabs.count()
        qtbot.mouseClick(widget.alternatives.next_button, Qt.MouseButton.LeftButton)

        def current() -> ConversationTab | None:
            shown = app.window.current_tab()
            return shown if shown is not None and shown.session_id == family.plain else None

        qtbot.waitUntil(lambda: current() is not None, timeout=WAIT_MS)
        switched = current()
        assert switched is not None and switched.ref.server == served.url
        assert app.window.tabs.count() == tabs_before
        qtbot.waitUntil(lambda: landed_number(switched) == 2, timeout=WAIT_MS)
        assert counter_of(switched.transcript.landed) == "2/3"
