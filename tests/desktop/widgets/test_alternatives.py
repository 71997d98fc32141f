"""Alternatives at a turn (``< k/n >``) and jumps that land on a turn, as the user sees them.

A real host over a real data folder: a root "Trip" with three turns, a plain
branch taken at turn 1 that asked its own turn 2, and an edit of turn 2 (so
turn 2 has three alternatives: the original, then the two branches in
creation order). Every check reads what the window shows: counter text,
tooltips, accessible names, which conversation the tab shows, which turn is
highlighted.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.alternatives import Family, counter_of, landed_number, make_family
from helpers.forking import fork_at
from helpers.gui import WAIT_MS, App
from helpers.sessions import complete_turn
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractSlider
from pytestqt.qtbot import QtBot

from branchwise.core.conversation.merge import merge_back
from branchwise.core.i18n.reasons import reason_text
from branchwise.core.store.store import SessionStore
from branchwise.desktop.widgets.turn_widget import TurnWidget


def family_app(make_app: Callable[..., App], tmp_path: Path) -> tuple[Family, App]:
    """The family written to a data folder, then the app started on it."""
    root = tmp_path / "root"
    family = make_family(SessionStore(root))
    return family, make_app(root=root)


def turn_numbered(app: App, session_id: str, number: int) -> TurnWidget | None:
    return next((w for w in app.turns(session_id) if w.row.index == number), None)


def shows(app: App, session_id: str) -> bool:
    tab = app.window.current_tab()
    return tab is not None and tab.session_id == session_id


def test_every_member_shows_the_same_set_at_the_turn_they_differ(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    family, app = family_app(make_app, tmp_path)
    for place, sid in enumerate((family.root, family.plain, family.edit), start=1):
        app.window.open_tab(sid)
        qtbot.waitUntil(lambda sid=sid: counter_of(turn_numbered(app, sid, 2)) is not None)
        widget = turn_numbered(app, sid, 2)
        assert widget is not None
        assert counter_of(widget) == f"{place}/3"
        # Turn 1 is shared by all three: it has no alternatives, nor has turn 3.
        assert counter_of(turn_numbered(app, sid, 1)) is None
        tip = widget.alternatives.counter.toolTip().splitlines()
        heading = f"Alternative {place} of 3 at this turn"
        # The original by its title, the others by their labels.
        assert tip == [heading, "1. Trip", "2. From turn 1", "3. Edited: Where to stay cheaply?"]
        previous, following = widget.alternatives.previous_button, widget.alternatives.next_button
        assert previous.isEnabled() == (place > 1)
        assert following.isEnabled() == (place < 3)
    root_turn = turn_numbered(app, family.root, 2)
    assert root_turn is not None
    assert root_turn.alternatives.next_button.toolTip() == "Next alternative: From turn 1"
    assert root_turn.alternatives.previous_button.toolTip() == "This is the first alternative"
    assert counter_of(turn_numbered(app, family.root, 3)) is None


def test_arrows_switch_the_tab_in_place_and_land_on_the_turn(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    family, app = family_app(make_app, tmp_path)
    other = app.host.create_session("Other").session_id
    app.window.open_tab(other)
    app.window.open_tab(family.root)
    qtbot.waitUntil(lambda: counter_of(turn_numbered(app, family.root, 2)) == "1/3")
    tabs_before = app.window.tabs.count()
    place = app.window.tabs.indexOf(app.tab(family.root))
    widget = turn_numbered(app, family.root, 2)
    assert widget is not None
    qtbot.mouseClick(widget.alternatives.next_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: shows(app, family.plain))
    # The same place in the tab bar now shows the branch; the parent has no tab left.
    assert app.window.tabs.count() == tabs_before
    assert app.window.tabs.indexOf(app.tab(family.plain)) == place
    assert app.window.tab_for(family.root) is None
    qtbot.waitUntil(lambda: landed_number(app.window.current_tab()) == 2)
    landed = app.tab(family.plain).transcript.landed
    assert landed is not None and landed.landed
    assert landed.accessibleDescription() == "You arrived at this turn"
    assert counter_of(landed) == "2/3"
    # Each alternative stays a whole conversation: the parent is still there, unchanged.
    assert len(app.host.store.read(family.root).projection.turns) == 3
    # Alt+Right from the keyboard, then Alt+Left back.
    app.window.activateWindow()
    qtbot.waitUntil(app.window.isActiveWindow, timeout=WAIT_MS)
    qtbot.keyClick(app.window, Qt.Key.Key_Right, Qt.KeyboardModifier.AltModifier)
    qtbot.waitUntil(lambda: shows(app, family.edit))
    qtbot.waitUntil(lambda: landed_number(app.window.current_tab()) == 2)
    assert counter_of(app.tab(family.edit).transcript.landed) == "3/3"
    qtbot.keyClick(app.window, Qt.Key.Key_Left, Qt.KeyboardModifier.AltModifier)
    qtbot.waitUntil(lambda: shows(app, family.plain))
    assert app.window.tabs.count() == tabs_before


def test_a_sibling_already_open_elsewhere_comes_forward(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    family, app = family_app(make_app, tmp_path)
    app.window.open_tab(family.plain)
    app.window.open_tab(family.root)
    qtbot.waitUntil(lambda: counter_of(turn_numbered(app, family.root, 2)) == "1/3")
    widget = turn_numbered(app, family.root, 2)
    assert widget is not None
    qtbot.mouseClick(widget.alternatives.next_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: shows(app, family.plain))
    # No conversation is ever shown twice: its own tab came forward, the parent's stayed.
    assert app.window.tabs.count() == 2
    assert app.window.tab_for(family.root) is not None
    qtbot.waitUntil(lambda: landed_number(app.window.current_tab()) == 2)


def test_open_parent_lands_on_the_fork_turn(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    family, app = family_app(make_app, tmp_path)
    app.window.open_tab(family.edit)
    tab = app.tab(family.edit)
    qtbot.waitUntil(lambda: tab.banner.isVisible())
    expected = "Branched from turn 2 of Trip · Edited: Where to stay cheaply?"
    assert tab.banner.label.text() == expected
    qtbot.mouseClick(tab.banner.open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: shows(app, family.root))
    # The parent opened in a tab of its own, scrolled to the edited turn, highlighted.
    assert app.window.tab_for(family.edit) is not None
    qtbot.waitUntil(lambda: landed_number(app.window.current_tab()) == 2)
    app.window.open_tab(family.plain)
    plain_tab = app.tab(family.plain)
    qtbot.waitUntil(lambda: plain_tab.banner.isVisible())
    assert plain_tab.banner.label.text() == "Branched from turn 1 of Trip · From turn 1"
    qtbot.mouseClick(plain_tab.banner.open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: shows(app, family.root) and landed_number(app.tab(family.root)) == 1)
    # The highlight stays until the reader scrolls.
    transcript = app.tab(family.root).transcript
    landed = transcript.landed
    assert landed is not None
    qtbot.waitUntil(lambda: transcript._pinned is None, timeout=WAIT_MS)
    transcript.verticalScrollBar().triggerAction(QAbstractSlider.SliderAction.SliderPageStepAdd)
    assert transcript.landed is None and not landed.landed
    assert landed.accessibleDescription() == ""


def test_switching_away_from_a_running_answer_lets_it_finish(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root = tmp_path / "root"
    family = make_family(SessionStore(root))
    app = make_app(delay=0.02, root=root)
    app.window.open_tab(family.root)
    qtbot.waitUntil(lambda: counter_of(turn_numbered(app, family.root, 2)) == "1/3")
    editor = app.tab(family.root).composer.editor
    editor.setPlainText("one more question, answered slowly " * 3)
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: app.host.is_running(family.root), timeout=WAIT_MS)
    widget = turn_numbered(app, family.root, 2)
    assert widget is not None
    qtbot.mouseClick(widget.alternatives.next_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: shows(app, family.plain))
    assert app.window.tab_for(family.root) is None
    assert app.host.is_running(family.root)
    # The answer goes on without a tab, is committed whole, and then the conversation closes.
    qtbot.waitUntil(lambda: app.host.session(family.root) is None, timeout=WAIT_MS * 3)
    turns = app.host.store.read(family.root).projection.turns
    assert len(turns) == 4 and turns[-1].end_reason == "completed"


def test_a_brought_back_card_opens_the_branch_at_the_turn_brought_back(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    store = SessionStore(tmp_path / "root")
    with store.create("Trip plans") as writer:
        complete_turn(writer, "r1", "where to?")
        root = writer.session_id
    child = fork_at(store, root, "r1", op="op-side").child_session_id
    with store.open_writer(child) as writer:
        writer.set_title("Side trip")
        complete_turn(writer, "c1", "what about Kyoto?")
        complete_turn(writer, "c2", "and Nara?")
    merge_back(store, child, None, "Kyoto, then Nara.", "summary", "op-merge")
    with store.open_writer(child) as writer:  # the branch went on after it was brought back
        complete_turn(writer, "c3", "and Osaka?")
    app = make_app(root=tmp_path / "root")
    app.window.open_tab(root)
    qtbot.waitUntil(lambda: len(app.turns(root)) == 2)
    card = app.turns(root)[-1]
    # Labelled as what it is, and its Branch button says plainly why it cannot be used.
    assert card.number_label.text() == "Brought back from a branch"
    assert card.shown_messages()[0][1].startswith("From branch Side trip:")
    assert not card.branch_button.isEnabled()
    reason = card.branch_button.toolTip()
    assert reason == reason_text("brought_back")
    assert reason.startswith("What a branch brought back is not a turn of its own")
    qtbot.mouseClick(card.open_source_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: shows(app, child))
    # Turn 3 of the branch (c2) was its last when brought back; turn 4 came later.
    qtbot.waitUntil(lambda: landed_number(app.tab(child)) == 3)
    landed = app.tab(child).transcript.landed
    assert landed is not None and landed.row.turn_id == "c2"


def test_a_language_switch_re_renders_the_switcher_and_the_banner(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    family, app = family_app(make_app, tmp_path)
    app.window.open_tab(family.edit)
    qtbot.waitUntil(lambda: counter_of(turn_numbered(app, family.edit, 2)) == "3/3")
    app.window.language_actions["zh_Hant"].trigger()
    widget = turn_numbered(app, family.edit, 2)
    assert widget is not None
    tip = widget.alternatives.counter.toolTip().splitlines()
    assert tip[0] == "此輪次的第 3 個版本，共 3 個"
    assert tip[2] == "第 2 個：從第 1 輪"
    assert widget.alternatives.previous_button.toolTip().startswith("上一個版本：")
    assert (
        app.tab(family.edit).banner.label.text()
        == "分支自「Trip」的第 2 輪 · 已編輯：Where to stay cheaply?"
    )
    app.window.language_actions["en"].trigger()
    assert widget.alternatives.counter.toolTip().splitlines()[0] == (
        "Alternative 3 of 3 at this turn"
    )


def test_a_branch_listed_at_a_turn_opens_where_it_differs(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    family, app = family_app(make_app, tmp_path)
    app.window.open_tab(family.root)
    qtbot.waitUntil(lambda: turn_numbered(app, family.root, 1) is not None)
    first = turn_numbered(app, family.root, 1)
    assert first is not None
    qtbot.waitUntil(first.branches_button.isVisible)
    listed = first.branches_button.menu().actions()[0]  # the only branch taken at turn 1
    listed.trigger()
    qtbot.waitUntil(lambda: shows(app, family.plain))
    # A new tab (the menu is no switcher), on the branch's own turn 2.
    assert app.window.tab_for(family.root) is not None
    qtbot.waitUntil(lambda: landed_number(app.tab(family.plain)) == 2)
