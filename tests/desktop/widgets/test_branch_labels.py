"""Branch labels in the window: sidebar rows, tabs, tooltips, banner, renaming, languages."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.gui import WAIT_MS, App, seed_session
from pytestqt.qtbot import QtBot

from branchwise.core.conversation.ask_again import branch_turn, regenerate_request
from branchwise.core.conversation.names import branch_title, new_branch_name_from_store
from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import fork_targets
from branchwise.core.ids import new_id
from branchwise.core.projection import events as ev
from branchwise.core.store.manifest import BranchLabel
from branchwise.core.store.store import SessionStore
from branchwise.desktop.widgets.sidebar import fitted_row_text

TITLE = "Explain git branches briefly"


def _family(store: SessionStore) -> tuple[str, str, str]:
    """A root with two turns, a regeneration of turn 2 and a plain branch at turn 1.

    The regeneration was made while English was shown ("(branch 1)"), the plain
    branch while 繁體中文 was ("（分支 2）"): titles keep the suffix they were made with.
    """
    root = seed_session(store, ["Explain git branches briefly", "And merging?"])
    turns = [t.turn_id for t in store.read(root).projection.turns]
    request = regenerate_request(store, root, turns[1])
    name = new_branch_name_from_store(store, root, request.turn_id, request.origin)
    regen = fork(
        store,
        request,
        "op-regen",
        title=branch_title(TITLE, 0, language="en"),
        label=name.label,
        fork_turn_index=name.fork_turn_index,
    ).child_session_id
    snapshot = store.read(regen)  # answer its question now: the window has nothing to run
    turn = branch_turn(snapshot.projection, snapshot.manifest.seed_length)
    assert turn is not None
    with store.open_writer(regen, continue_turn=turn.turn_id) as writer:
        step = new_id("step")
        writer.commit([ev.step_start(step)])
        writer.commit(
            [
                ev.assistant_message(new_id("msg"), "another answer", "demo"),
                ev.step_end(step),
                ev.turn_end(turn.turn_id, "completed"),
            ]
        )
    targets = fork_targets(store, root)
    plain_request = ForkRequest(
        root, turns[0], targets.targets[0].boundary_sequence or 0, targets.generation
    )
    name = new_branch_name_from_store(store, root, turns[0])
    plain = fork(
        store,
        plain_request,
        "op-plain",
        title=branch_title(TITLE, 1, language="zh_Hant"),
        label=name.label,
        fork_turn_index=name.fork_turn_index,
    ).child_session_id
    return root, regen, plain


def _row(app: App, session_id: str) -> str:
    item = app.window.sidebar.item_for(session_id)
    assert item is not None
    return item.text(0)


def _tab_text(app: App, session_id: str) -> str:
    tabs = app.window.tabs
    return tabs.tabText(tabs.indexOf(app.tab(session_id)))


def _tab_tip(app: App, session_id: str) -> str:
    tabs = app.window.tabs
    return tabs.tabToolTip(tabs.indexOf(app.tab(session_id)))


def test_rows_tabs_and_tooltips_name_each_branch_and_re_render_on_a_language_switch(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root, regen, plain = _family(SessionStore(tmp_path / "root"))
    app = make_app()
    assert _row(app, root) == TITLE
    assert _row(app, regen) == f"{TITLE} (branch 1) · Regenerated 2"
    # a title made while 繁體中文 was shown reads in the language shown now
    assert _row(app, plain) == f"{TITLE} (branch 2) · From turn 1"
    tip = app.window.sidebar.tooltip_for(regen).splitlines()
    assert tip[:2] == [f"{TITLE} (branch 1)", "Regenerated 2"]
    assert tip[2].startswith(f"Branched from turn 2 of {TITLE} on ")
    app.window.open_tab(regen)
    app.window.open_tab(plain)
    assert _tab_text(app, regen).endswith(" · Regenerated 2")
    assert _tab_tip(app, regen).splitlines()[:2] == [f"{TITLE} (branch 1)", "Regenerated 2"]
    banner = app.tab(regen).banner.label
    qtbot.waitUntil(lambda: banner.text().endswith(" · Regenerated 2"), timeout=WAIT_MS)

    app.window.choose_language("zh_Hant")  # what the Language menu does
    qtbot.waitUntil(lambda: _row(app, regen).endswith("重新產生 2"), timeout=WAIT_MS)
    # no "(branch 1)" beside "（分支 2）": every suffix in the language shown
    assert _row(app, regen) == f"{TITLE}（分支 1） · 重新產生 2"
    assert _row(app, plain) == f"{TITLE}（分支 2） · 從第 1 輪"
    assert _tab_text(app, plain).endswith("（分支 2） · 從第 1 輪")
    tip = _tab_tip(app, regen).splitlines()
    assert tip[:2] == [f"{TITLE}（分支 1）", "重新產生 2"]
    assert tip[2].startswith("於 ") and tip[2].endswith(f"從 {TITLE} 的第 2 輪分支")
    qtbot.waitUntil(lambda: banner.text().endswith(" · 重新產生 2"), timeout=WAIT_MS)
    app.window.choose_language("zh_Hans")
    qtbot.waitUntil(lambda: _row(app, plain).endswith("从第 1 轮"), timeout=WAIT_MS)
    assert _row(app, regen) == f"{TITLE}（分支 1） · 重新生成 2"


def test_a_narrow_row_elides_the_title_in_its_middle_and_keeps_the_label(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    _root, regen, _plain = _family(SessionStore(tmp_path / "root"))
    app = make_app()
    sidebar = app.window.sidebar
    metrics = sidebar.tree.fontMetrics()
    wide = sidebar.shown_text(regen, 2_000)
    assert wide == f"{TITLE} (branch 1) · Regenerated 2"
    narrow = sidebar.shown_text(regen, metrics.horizontalAdvance(wide) // 2)
    title_part, label_part = narrow.split(" · ")
    assert label_part == "Regenerated 2"  # the label whole
    assert title_part.startswith("Expl") and title_part.endswith("1)")  # both ends of the title
    assert "…" in title_part
    assert len(narrow) < len(wide)
    # the merged mark is never cut off either
    mark = "  ↩ merged"
    shown = fitted_row_text(metrics, 120, "● ", TITLE + " (branch 7)", " · Regenerated 2" + mark)
    assert shown.startswith("● Ex") and shown.endswith("7) · Regenerated 2" + mark)
    assert "…" in shown and shown.index("…") < shown.index(" · Regenerated")


def test_the_user_renames_a_label_from_the_sidebar_and_the_tab(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    store = SessionStore(tmp_path / "root")
    root, regen, plain = _family(store)
    app = make_app()
    sidebar = app.window.sidebar
    menu_texts = [a.text() for a in sidebar.context_menu(regen).actions()]
    assert "Rename label…" in menu_texts
    assert "Rename label…" not in [a.text() for a in sidebar.context_menu(root).actions()]
    dialog = sidebar.ask_rename_label(regen)
    assert dialog.textValue() == "Regenerated 2"
    dialog.textValueSelected.emit("  the terse answer ")
    qtbot.waitUntil(lambda: _row(app, regen).endswith(" · the terse answer"), timeout=WAIT_MS)
    assert store.manifest(regen).label == BranchLabel("given", text="the terse answer")

    app.window.open_tab(plain)
    menu = app.window.tab_menu(app.tab(plain))
    assert [a.text() for a in menu.actions()] == ["Rename…", "Rename label…"]
    tab_dialog = app.window.ask_rename_label(app.tab(plain))
    assert tab_dialog is not None
    tab_dialog.textValueSelected.emit("tags first")
    qtbot.waitUntil(lambda: _tab_text(app, plain).endswith(" · tags first"), timeout=WAIT_MS)
    assert _row(app, plain).endswith(" · tags first")
    # a given label is the user's words: a language switch leaves it as typed
    app.window.choose_language("zh_Hans")
    qtbot.waitUntil(lambda: "（分支 2）" in _row(app, plain), timeout=WAIT_MS)
    assert _row(app, plain).endswith(" · tags first")
    # an empty label is refused with its reason, and nothing changes
    app.window.choose_language("en")
    dialog = sidebar.ask_rename_label(plain)
    dialog.textValueSelected.emit("   ")
    refusal = "A branch label needs 1 to 80 characters."
    qtbot.waitUntil(lambda: refusal in app.notice_texts(), timeout=WAIT_MS)
    assert store.manifest(plain).label == BranchLabel("given", text="tags first")
