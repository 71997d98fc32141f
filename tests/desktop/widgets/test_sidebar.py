"""The conversation list: any depth of branches, and updates that touch only what changed."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from helpers.gui import BRANCH, WAIT_MS, App, seed_session
from helpers.sessions import write_child_chain
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QTreeWidgetItem
from pytestqt.qtbot import QtBot

from branchwise.core.store.store import SessionStore
from branchwise.desktop.widgets.sidebar import RUNNING_MARK


def _ancestors(item: QTreeWidgetItem) -> list[QTreeWidgetItem]:
    found = []
    parent = item.parent()
    while parent is not None:
        found.append(parent)
        parent = parent.parent()
    return found


def test_a_chain_of_2000_branches_opens_and_shows_the_deepest(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    ids = write_child_chain(SessionStore(tmp_path / "root"), 2_000)
    assert len(ids) > sys.getrecursionlimit()
    app = make_app()
    sidebar = app.window.sidebar
    deepest = sidebar.item_for(ids[-1])
    assert deepest is not None and deepest.text(0) == "level 1999 · Sub-conversation"
    assert sidebar.parent_of(ids[-1]) == ids[-2]
    ancestors = _ancestors(deepest)
    assert len(ancestors) == 1_999 and all(item.isExpanded() for item in ancestors)
    assert sidebar.tree.topLevelItemCount() == 1

    sidebar.tree.itemClicked.emit(deepest, 0)  # what a click on the row does
    qtbot.waitUntil(lambda: app.window.tab_for(ids[-1]) is not None, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: sidebar.tree.currentItem() is deepest, timeout=WAIT_MS)
    tab = app.tab(ids[-1])
    qtbot.waitUntil(lambda: tab.banner.label.text() == "Started from level 1998", timeout=WAIT_MS)


def _send(qtbot: QtBot, app: App, session_id: str, text: str) -> None:
    editor = app.tab(session_id).composer.editor
    editor.setPlainText(text)
    qtbot.keyClick(editor, Qt.Key.Key_Return)


def test_a_turn_refreshes_its_running_mark_without_rebuilding_the_tree(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    store = SessionStore(tmp_path / "root")
    other = seed_session(store, ["an older conversation"], title="Older")
    sid = seed_session(store, ["first"], title="Streaming")
    app = make_app(delay=0.03)
    sidebar = app.window.sidebar
    item, other_item = sidebar.item_for(sid), sidebar.item_for(other)
    assert item is not None and other_item is not None
    assert item.text(0) == "Streaming"
    app.window.open_tab(sid)
    qtbot.waitUntil(lambda: len(app.turns(sid)) == 1, timeout=WAIT_MS)

    _send(qtbot, app, sid, "second, slowly")
    qtbot.waitUntil(lambda: item.text(0) == RUNNING_MARK + "Streaming", timeout=WAIT_MS)
    assert sidebar.item_for(sid) is item and sidebar.item_for(other) is other_item
    assert item.data(0, Qt.ItemDataRole.AccessibleTextRole) == "Streaming, Running"
    qtbot.waitUntil(lambda: item.text(0) == "Streaming", timeout=WAIT_MS)
    assert sidebar.item_for(sid) is item and sidebar.item_for(other) is other_item
    assert sidebar.tree.topLevelItemCount() == 2
    # Renaming re-renders the same item too.
    sidebar.rename(sid, "Renamed")
    assert item.text(0) == "Renamed" and sidebar.item_for(sid) is item


def test_a_new_branch_and_a_new_conversation_are_inserted_in_place(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    store = SessionStore(tmp_path / "root")
    sid = seed_session(store, ["alpha", "beta"], title="Planning")
    app = make_app()
    sidebar = app.window.sidebar
    parent_item = sidebar.item_for(sid)
    assert parent_item is not None and parent_item.childCount() == 0
    app.window.open_tab(sid)
    qtbot.waitUntil(
        lambda: len(app.turns(sid)) == 2 and app.turns(sid)[1].branch_button.isEnabled(),
        timeout=WAIT_MS,
    )
    assert app.turns(sid)[1].branch_button.toolTip() == BRANCH

    qtbot.mouseClick(app.turns(sid)[1].branch_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(app.window.conversation_tabs()) == 2, timeout=WAIT_MS)
    child = app.window.current_tab()
    assert child is not None
    cid = child.session_id
    assert sidebar.item_for(sid) is parent_item  # the tree was not rebuilt
    assert sidebar.parent_of(cid) == sid and parent_item.isExpanded()
    assert parent_item.child(0) is sidebar.item_for(cid)
    qtbot.waitUntil(lambda: sidebar.tree.currentItem() is sidebar.item_for(cid), timeout=WAIT_MS)

    qtbot.mouseClick(app.turns(sid)[0].branch_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(app.window.conversation_tabs()) == 3, timeout=WAIT_MS)
    second = app.window.current_tab()
    assert second is not None
    # Newest first under the parent, the first branch's item kept.
    assert [parent_item.child(i).data(0, Qt.ItemDataRole.UserRole) for i in range(2)] == [
        second.session_id,
        cid,
    ]
    first_branch = sidebar.item_for(cid)

    qtbot.mouseClick(app.window.sidebar.new_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(app.window.conversation_tabs()) == 4, timeout=WAIT_MS)
    fresh = app.window.current_tab()
    assert fresh is not None
    assert sidebar.tree.topLevelItem(0) is sidebar.item_for(fresh.session_id)
    assert sidebar.tree.topLevelItem(1) is parent_item
    assert sidebar.item_for(cid) is first_branch
