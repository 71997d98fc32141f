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
from dataclasses import dataclass
from pathlib import Path

from helpers.forking import fork_at
from helpers.gui import WAIT_MS, App, seed_session
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from branchwise.core.conversation.ask_again import edit_request
from branchwise.core.fork.engine import fork
from branchwise.core.ids import new_id
from branchwise.core.projection import events as ev
from branchwise.core.providers.demo import DEMO_MODEL
from branchwise.core.store.store import SessionStore
from branchwise.desktop.widgets.conversation_tab import ConversationTab
from branchwise.desktop.widgets.turn_widget import TurnWidget


@dataclass(frozen=True)
class Family:
    """The root, its turn ids, a plain branch at turn 1 and an edit of turn 2."""

    root: str
    turns: tuple[str, ...]
    plain: str
    edit: str


def add_turn(store: SessionStore, session_id: str, question: str) -> str:
    """Commit one finished turn to a session, as the runner does; its turn id."""
    turn_id, step = new_id("turn"), new_id("step")
    with store.open_writer(session_id) as writer:
        writer.commit(
            [ev.turn_start(turn_id), ev.user_message(new_id("msg"), question), ev.step_start(step)]
        )
        writer.commit(
            [
                ev.assistant_message(new_id("msg"), f"About {question}", DEMO_MODEL),
                ev.step_end(step),
                ev.turn_end(turn_id, "completed"),
            ]
        )
    return turn_id


def finish_asked_turn(store: SessionStore, session_id: str) -> None:
    """Answer the turn an edit published already asked (as its runner would)."""
    snapshot = store.read(session_id)
    open_turn = snapshot.projection.open_turn
    assert open_turn is not None
    with store.open_writer(session_id, continue_turn=open_turn.turn_id) as writer:
        writer.commit(
            [
                ev.assistant_message(new_id("msg"), "A cheap hostel.", DEMO_MODEL),
                ev.turn_end(open_turn.turn_id, "completed"),
            ]
        )


def make_family(store: SessionStore) -> Family:
    root = seed_session(store, ["Plan a trip", "Where to stay?", "What to eat?"], title="Trip")
    turns = tuple(t.turn_id for t in store.read(root).projection.turns)
    plain = fork_at(store, root, turns[0], op="op-plain").child_session_id
    add_turn(store, plain, "Where to camp?")
    request = edit_request(store, root, turns[1], "Where to stay cheaply?")
    edit = fork(store, request, "op-edit").child_session_id
    finish_asked_turn(store, edit)
    return Family(root, turns, plain, edit)


def family_app(make_app: Callable[..., App], tmp_path: Path) -> tuple[Family, App]:
    """The family written to a data folder, then the app started on it."""
    root = tmp_path / "root"
    family = make_family(SessionStore(root))
    return family, make_app(root=root)


def turn_numbered(app: App, session_id: str, number: int) -> TurnWidget | None:
    return next((w for w in app.turns(session_id) if w.row.index == number), None)


def counter_of(widget: TurnWidget | None) -> str | None:
    if widget is None or widget.alternatives.isHidden():
        return None
    return widget.alternatives.counter.text()


def shows(app: App, session_id: str) -> bool:
    tab = app.window.current_tab()
    return tab is not None and tab.session_id == session_id


def landed_number(tab: ConversationTab | None) -> int | None:
    landed = tab.transcript.landed if tab is not None else None
    return landed.row.index if landed is not None else None


def test_every_member_shows_the_same_set_at_the_turn_they_differ(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    family, app = family_app(make_app, tmp_path)
    app.host.rename(family.plain, "Camping")
    app.host.rename(family.edit, "Cheap stay")
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
        assert tip == [heading, "1. Trip", "2. Camping", "3. Cheap stay"]
        previous, following = widget.alternatives.previous_button, widget.alternatives.next_button
        assert previous.isEnabled() == (place > 1)
        assert following.isEnabled() == (place < 3)
    root_turn = turn_numbered(app, family.root, 2)
    assert root_turn is not None
    assert root_turn.alternatives.next_button.toolTip() == "Next alternative: Camping"
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
    assert plain_tab.banner.label.text() == "Branched from turn 1 of Trip"
    qtbot.mouseClick(plain_tab.banner.open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: shows(app, family.root) and landed_number(app.tab(family.root)) == 1)
