"""Move to Trash with its branches: from the sidebar and from the map; one notice, one Undo."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.family import build_map_family
from helpers.gui import WAIT_MS, App
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from branchwise.core.store.store import SessionStore
from branchwise.desktop.widgets.notice_area import NoticeRow

PRUNE = "Move to Trash with its branches"
MOVED = "Moved Trip and its branches to the Trash."


def _shown(app: App, session_id: str) -> bool:
    return app.window.sidebar.item_for(session_id) is not None


def _row(app: App, text: str) -> NoticeRow | None:
    return next((r for r in app.window.notice_area.rows() if r.text == text), None)


def test_the_sidebar_prunes_a_branch_with_its_branches_and_one_undo_restores_all(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root = tmp_path / "root"
    f = build_map_family(SessionStore(root))
    app = make_app(root=root)
    app.window.open_tab(f.nested)
    qtbot.waitUntil(lambda: _shown(app, f.nested), timeout=WAIT_MS)
    assert PRUNE not in [a.text() for a in app.window.sidebar.context_menu(f.nested).actions()]
    action = next(
        a for a in app.window.sidebar.context_menu(f.plain).actions() if a.text() == PRUNE
    )
    action.trigger()
    qtbot.waitUntil(lambda: not _shown(app, f.plain) and not _shown(app, f.nested), timeout=WAIT_MS)
    assert app.window.tab_for(f.nested) is None and _shown(app, f.edit)
    qtbot.waitUntil(lambda: _row(app, MOVED) is not None, timeout=WAIT_MS)
    assert [t for t in app.notice_texts() if "Trash" in t] == [MOVED]  # one notice
    row = _row(app, MOVED)
    assert row is not None and row.action_button.text() == "Undo"
    qtbot.mouseClick(row.action_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _shown(app, f.plain) and _shown(app, f.nested), timeout=WAIT_MS)
    assert app.window.sidebar.parent_of(f.nested) == f.plain  # back whole, where it was


def test_the_map_prunes_the_selected_subtree_and_draws_the_rest(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root = tmp_path / "root"
    f = build_map_family(SessionStore(root))
    app = make_app(root=root)
    app.window.open_tab(f.root)
    app.window.show_branch_map()
    qtbot.waitUntil(
        lambda: app.window.branch_map is not None and app.window.branch_map.isVisible(),
        timeout=WAIT_MS,
    )
    dialog = app.window.branch_map
    assert dialog is not None and dialog.prune_button.text() == PRUNE
    dialog.view.select((f.plain, 2))
    dialog.prune_button.click()
    qtbot.waitUntil(
        lambda: (
            dialog.view.layout_shown is not None
            and f.plain not in {p.node.session_id for p in dialog.view.layout_shown.nodes}
        ),
        timeout=WAIT_MS,
    )
    members = {p.node.session_id for p in dialog.view.layout_shown.nodes}
    assert f.nested not in members and f.edit in members
    qtbot.waitUntil(lambda: _row(app, MOVED) is not None, timeout=WAIT_MS)
