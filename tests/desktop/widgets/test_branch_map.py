"""Conversation ▸ Branch map, driven as a user would: menu, shortcut, banner, keys, Enter.

Real sessions on disk (a family with every kind of member), the real window
offscreen, and for a server's conversation a real ``branchwise serve``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.family import MapFamily, build_map_family
from helpers.forking import fork_at
from helpers.gui import WAIT_MS, App, seed_session
from helpers.serve import serve_process
from helpers.sessions import complete_turn
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot
from test_remote_actions import connect, item_named, open_remote, tree_texts

from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.landing import TurnTarget
from branchwise.desktop.host.rows import PAGE_SIZE
from branchwise.desktop.widgets.branch_map import BranchMapView
from branchwise.desktop.widgets.conversation_tab import ConversationTab


def _family_app(make_app: Callable[..., App], tmp_path: Path) -> tuple[App, MapFamily]:
    root = tmp_path / "root"
    family = build_map_family(SessionStore(root))
    return make_app(root=root), family


def _map(qtbot: QtBot, app: App) -> BranchMapView:
    qtbot.waitUntil(
        lambda: app.window.branch_map is not None and app.window.branch_map.isVisible(),
        timeout=WAIT_MS,
    )
    assert app.window.branch_map is not None
    return app.window.branch_map.view


def _current(app: App) -> ConversationTab:
    tab = app.window.current_tab()
    assert tab is not None
    return tab


def test_the_menu_opens_the_family_with_the_open_conversation_selected(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app, f = _family_app(make_app, tmp_path)
    app.window.open_tab(f.plain)
    action = app.window.branch_map_action
    assert action.text() == "Branch map" and action in app.window.conversation_menu.actions()
    action.trigger()
    view = _map(qtbot, app)
    assert view.accessibleName() == "Branch map"
    texts = view.node_texts()
    assert texts[:3] == ["1 · Trip", "2 · Trip", "3 · Trip"]
    assert texts[3:] == [
        "2 · From turn 1",
        "3 · From turn 1",
        "3 · From turn 2",  # the nested branch, no turns of its own yet
        "2 · Edited: ask r2 otherwise",
        "3 · Edited: ask r2 otherwise",
        "3 · Regenerated 2",
        "4 · Regenerated 2",
        "1 · Sub-conversation of turn 2",
        "⚠ 3 · From turn 2",  # the damaged branch, placed and marked
    ]  # the trashed branch is not drawn
    assert sorted(view.edge_texts()) == sorted(
        [
            "Branched",
            "Branched",
            "Edited",
            "Regenerated",
            "Child conversation",
            "Branched",
            "Brought back",
        ]
    )
    assert view.selected == (f.plain, 3)  # the open conversation's last turn
    assert view.accessibleDescription() == "Turn 3 of Trip · From turn 1 (the open conversation)"


def test_arrows_walk_the_tree_and_enter_opens_the_conversation_at_that_turn(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app, f = _family_app(make_app, tmp_path)
    app.window.open_tab(f.plain)
    app.window.show_branch_map()
    view = _map(qtbot, app)
    moves = [
        (Qt.Key.Key_Left, (f.plain, 2)),
        (Qt.Key.Key_Left, (f.root, 1)),  # where the branch left from
        (Qt.Key.Key_Left, (f.root, 1)),  # the first turn has no parent
        (Qt.Key.Key_Right, (f.root, 2)),  # the conversation's own next turn first
        (Qt.Key.Key_Down, (f.plain, 2)),  # then the branches taken at turn 1
        (Qt.Key.Key_Down, (f.edit, 2)),
        (Qt.Key.Key_Down, (f.edit, 2)),  # no further alternative
        (Qt.Key.Key_Up, (f.plain, 2)),
        (Qt.Key.Key_Down, (f.edit, 2)),
        (Qt.Key.Key_Right, (f.edit, 3)),
    ]
    for key, expected in moves:
        qtbot.keyClick(view, key)
        assert view.selected == expected, (key, view.selected_text())
    assert view.accessibleDescription() == "Turn 3 of Trip · Edited: ask r2 otherwise"
    qtbot.keyClick(view, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: _current(app).session_id == f.edit, timeout=WAIT_MS)
    tab = _current(app)
    qtbot.waitUntil(
        lambda: any(w.landed and w.row.turn_id == "e1" for w in tab.turn_widgets()),
        timeout=WAIT_MS,
    )


def test_the_shortcut_and_the_banner_open_it_and_zoom_keys_zoom(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app, f = _family_app(make_app, tmp_path)
    app.window.open_tab(f.regen)
    app.window.activateWindow()
    qtbot.waitUntil(app.window.isActiveWindow, timeout=WAIT_MS)
    both = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    qtbot.keyClick(app.window, Qt.Key.Key_M, both)
    view = _map(qtbot, app)
    assert view.selected == (f.regen, 4)
    app.window.branch_map.close()
    app.window.open_tab(f.child)
    banner = _current(app).banner
    assert banner.map_button.text() == "Branch map" and banner.map_button.isVisible()
    banner.map_button.click()
    qtbot.waitUntil(lambda: view.isVisible() and view.selected == (f.child, 1), timeout=WAIT_MS)
    assert not view.mini_map.isVisible()  # a small family fits
    before = view.zoom
    qtbot.keyClick(view, Qt.Key.Key_Plus)
    assert view.zoom > before
    qtbot.keyClick(view, Qt.Key.Key_Minus)
    qtbot.keyClick(view, Qt.Key.Key_Minus)
    assert view.zoom < before


def test_the_shortcuts_window_lists_the_branch_map(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    dialog = app.window.show_shortcuts()
    assert ("Branch map", "Ctrl+Shift+M") in dialog.rows()


def test_a_family_that_does_not_fit_gets_a_mini_map(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root = tmp_path / "root"
    store = SessionStore(root)
    with store.create("Wide") as writer:
        for n in range(12):
            complete_turn(writer, f"w{n}", f"ask {n}")
        wide = writer.session_id
    for n in range(30):
        fork_at(store, wide, f"w{n % 12}", op=f"op-{n}")
    app = make_app(root=root)
    app.window.open_tab(wide)
    app.window.show_branch_map()
    view = _map(qtbot, app)
    qtbot.waitUntil(view.mini_map.isVisible, timeout=WAIT_MS)
    assert view.mini_map.accessibleName() == "Mini map of the branch map"


def test_a_servers_conversation_shows_the_same_map_and_opens_there(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    store = SessionStore(served_root)
    sid = seed_session(store, ["hello", "and then"], title="Shared")
    first = store.read(sid).projection.turns[0].turn_id
    branch = fork_at(store, sid, first, op="op-remote").child_session_id
    app = make_app()
    with serve_process(served_root) as served:
        connect(app, served.url, served.token)
        qtbot.waitUntil(lambda: len(tree_texts(app)) == 3, timeout=WAIT_MS)
        item_named(app, "Shared")
        tab = open_remote(qtbot, app, "Shared")
        qtbot.waitUntil(lambda: len(tab.turn_widgets()) == 2, timeout=WAIT_MS)
        app.window.branch_map_action.trigger()
        view = _map(qtbot, app)
        assert view.node_texts() == ["1 · Shared", "2 · Shared", "2 · From turn 1"]
        assert view.edge_texts() == ["Branched"]
        assert view.selected == (sid, 2)
        qtbot.keyClick(view, Qt.Key.Key_Down)
        assert view.selected == (branch, 2)
        qtbot.keyClick(view, Qt.Key.Key_Return)
        qtbot.waitUntil(
            lambda: _current(app).ref.remote and _current(app).session_id == branch,
            timeout=WAIT_MS,
        )


def test_a_language_switch_rewords_the_map_and_its_labels(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app, f = _family_app(make_app, tmp_path)
    app.window.open_tab(f.plain)
    app.window.show_branch_map()
    view = _map(qtbot, app)
    app.window.language_actions["zh_Hans"].trigger()
    qtbot.waitUntil(lambda: view.accessibleName() == "分支图", timeout=WAIT_MS)
    assert app.window.branch_map_action.text() == "分支图"
    qtbot.waitUntil(lambda: "已编辑" in view.edge_texts(), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: "2 · From turn 1" not in view.node_texts(), timeout=WAIT_MS)
    app.window.language_actions["en"].trigger()
    qtbot.waitUntil(lambda: "2 · From turn 1" in view.node_texts(), timeout=WAIT_MS)


def test_the_open_map_follows_a_turn_as_it_runs_and_keeps_the_selection(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root = tmp_path / "root"
    f = build_map_family(SessionStore(root))
    app = make_app(root=root, delay=0.05)
    tab = app.window.open_tab(f.edit)
    app.window.show_branch_map()
    view = _map(qtbot, app)
    view.select((f.root, 2))
    tab.composer.editor.setPlainText("and after that?")
    qtbot.waitUntil(tab.composer.send_button.isEnabled, timeout=WAIT_MS)
    tab.composer.send_button.click()
    running = "● 4 · Edited: ask r2 otherwise"
    qtbot.waitUntil(lambda: running in view.node_texts(), timeout=WAIT_MS)
    qtbot.waitUntil(
        lambda: (
            running not in view.node_texts() and "4 · Edited: ask r2 otherwise" in view.node_texts()
        ),
        timeout=WAIT_MS * 3,
    )
    assert view.selected == (f.root, 2)


def test_a_click_on_a_node_opens_that_conversation_at_that_turn(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app, f = _family_app(make_app, tmp_path)
    app.window.open_tab(f.root)
    app.window.show_branch_map()
    view = _map(qtbot, app)
    placed = view.node((f.plain, 2))
    assert placed is not None
    center = view.mapFromScene(
        placed.rect.x + placed.rect.width / 2, placed.rect.y + placed.rect.height / 2
    )
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=center)
    qtbot.waitUntil(lambda: _current(app).session_id == f.plain, timeout=WAIT_MS)
    tab = _current(app)
    qtbot.waitUntil(
        lambda: any(w.landed and w.row.turn_id == "p1" for w in tab.turn_widgets()),
        timeout=WAIT_MS,
    )
    assert view.selected == (f.plain, 2)


def test_the_map_opens_on_the_turn_being_read(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root = tmp_path / "root"
    store = SessionStore(root)
    long = seed_session(store, [f"question {n} " + "words " * 80 for n in range(12)], "Long")
    app = make_app(root=root)
    tab = app.window.open_tab(long)
    qtbot.waitUntil(lambda: len(tab.turn_widgets()) == 12, timeout=WAIT_MS)
    app.window.open_at(tab.ref, TurnTarget(tab.turn_widgets()[3].row.turn_id))
    qtbot.waitUntil(lambda: tab.turn_widgets()[3].landed, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: tab.turn_in_view() is not None, timeout=WAIT_MS)
    reading = tab.turn_in_view()
    app.window.show_branch_map()
    view = _map(qtbot, app)
    placed = view.node(view.selected)
    assert placed is not None and placed.node.turn_id == reading and placed.focus_turn
    assert view.accessibleDescription().endswith("(the turn you are reading)")


def test_a_servers_big_conversation_opens_at_an_early_turn_from_the_map(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    store = SessionStore(served_root)
    sid = seed_session(store, [f"q{n}" for n in range(PAGE_SIZE + 20)], title="Long")
    third = store.read(sid).projection.turns[2].turn_id
    app = make_app()
    with serve_process(served_root) as served:
        connect(app, served.url, served.token)
        qtbot.waitUntil(lambda: len(tree_texts(app)) == 2, timeout=WAIT_MS)
        tab = open_remote(qtbot, app, "Long")
        qtbot.waitUntil(lambda: len(tab.turn_widgets()) > 0, timeout=WAIT_MS)
        assert not any(w.row.turn_id == third for w in tab.turn_widgets())  # not read yet
        app.window.branch_map_action.trigger()
        view = _map(qtbot, app)
        view.select((sid, 3))
        qtbot.keyClick(view, Qt.Key.Key_Return)
        qtbot.waitUntil(
            lambda: any(w.landed and w.row.turn_id == third for w in tab.turn_widgets()),
            timeout=WAIT_MS * 2,
        )
