"""The lineage tree marks a branch brought back into its parent (here or by another process)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.cli import run_cli
from helpers.forking import fork_at
from helpers.gui import WAIT_MS, App, run
from helpers.sessions import complete_turn
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from branchwise.core.i18n.language import set_language
from branchwise.core.search.index import INDEX_NAME
from branchwise.core.store.store import SessionStore
from branchwise.desktop.widgets.sidebar import MERGED_MARK


def _seed(store: SessionStore) -> tuple[str, str, str]:
    """A root with a branch ("Side trip") and a fork of that branch ("Deeper")."""
    with store.create("Trip plans") as writer:
        complete_turn(writer, "r1", "where to?")
        root = writer.session_id
    child = fork_at(store, root, "r1", op="op-side").child_session_id
    with store.open_writer(child) as writer:
        writer.set_title("Side trip")
        complete_turn(writer, "c1", "what about Kyoto?")
    deeper = fork_at(store, child, "c1", op="op-deeper").child_session_id
    with store.open_writer(deeper) as writer:
        writer.set_title("Deeper")
        complete_turn(writer, "d1", "and Nara?")
    return root, child, deeper


def _shown(app: App, session_id: str) -> tuple[str, str, str]:
    """The item's text, accessible name and tooltip, as the user meets them."""
    item = app.window.sidebar.item_for(session_id)
    assert item is not None
    return (
        item.text(0),
        str(item.data(0, Qt.ItemDataRole.AccessibleTextRole)),
        app.window.sidebar.tooltip_for(session_id),
    )


def _marked(app: App, session_id: str) -> bool:
    return MERGED_MARK in _shown(app, session_id)[0]


def test_a_branch_brought_back_from_the_desktop_is_marked(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root, child, deeper = _seed(SessionStore(tmp_path / "root"))
    app = make_app()
    run(qtbot, app.host.search_idle())
    assert not _marked(app, child) and not _marked(app, deeper)

    app.window.open_tab(child)
    tab = app.tab(child)
    qtbot.waitUntil(lambda: tab.banner.bring_back_button.isVisible(), timeout=WAIT_MS)
    qtbot.mouseClick(tab.banner.bring_back_button, Qt.MouseButton.LeftButton)
    dialog = tab.bring_back_dialog
    assert dialog is not None
    qtbot.waitUntil(lambda: dialog.answers.count() > 0, timeout=WAIT_MS)
    dialog.answers.item(0).setCheckState(Qt.CheckState.Checked)
    qtbot.waitUntil(dialog.confirm_button.isEnabled, timeout=WAIT_MS)
    qtbot.mouseClick(dialog.confirm_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _marked(app, child), timeout=WAIT_MS)

    text, accessible, tooltip = _shown(app, child)
    assert text == "Side trip · From turn 1  ↩ merged"
    assert accessible.startswith("Side trip, From turn 1, Brought back into Trip plans on ")
    assert tooltip.splitlines()[1] == "From turn 1"
    assert tooltip.splitlines()[2].startswith("Branched from turn 1 of Trip plans on ")
    assert tooltip.splitlines()[3].startswith("Brought back into Trip plans on ")
    # The parent and the branch's own branch were not brought back anywhere.
    assert not _marked(app, root) and not _marked(app, deeper)

    set_language("zh_Hans")
    app.window.retranslate_ui()
    text, accessible, _tooltip = _shown(app, child)
    assert text == "Side trip · 从第 1 轮  ↩ 已合并"
    assert "带回“Trip plans”" in accessible
    set_language("zh_Hant")
    app.window.retranslate_ui()
    assert _shown(app, child)[0] == "Side trip · 從第 1 輪  ↩ 已合併"
    set_language("en")


def test_a_merge_by_the_cli_in_another_process_shows_after_a_refresh(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root, child, deeper = _seed(SessionStore(tmp_path / "root"))
    app = make_app()
    run(qtbot, app.host.search_idle())
    assert not _marked(app, deeper)

    # Into the grandparent ("any ancestor"), by another process.
    _code, out = run_cli(app.root, "session", "merge", deeper, "--into", root, "--turn", "d1")
    assert out["parentSessionId"] == root and out["created"] is True
    app.window.disk_refresh_timer.timeout.emit()  # what the window's timer does every 15 s
    qtbot.waitUntil(lambda: _marked(app, deeper), timeout=WAIT_MS)
    _text, accessible, tooltip = _shown(app, deeper)
    assert "Brought back into Trip plans on " in accessible
    assert "Brought back into Trip plans on " in tooltip
    assert not _marked(app, child)


def test_the_mark_survives_a_restart_with_the_cache_deleted(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    data = tmp_path / "root"
    _root, child, _deeper = _seed(SessionStore(data))
    run_cli(data, "session", "merge", child, "--turn", "c1")
    first = make_app()
    run(qtbot, first.host.search_idle())
    qtbot.waitUntil(lambda: _marked(first, child), timeout=WAIT_MS)
    run(qtbot, first.host.shutdown())
    (data / INDEX_NAME).unlink()

    second = make_app()
    run(qtbot, second.host.search_idle())
    qtbot.waitUntil(lambda: _marked(second, child), timeout=WAIT_MS)
    assert (data / INDEX_NAME).exists()
