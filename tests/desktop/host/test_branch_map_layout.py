"""The branch map's layout (Qt-free): lanes, columns, what is in view, the tree moves."""

from __future__ import annotations

from pathlib import Path

from helpers.family import build_map_family

from branchwise.core.conversation.ask_again import edit_request
from branchwise.core.conversation.family_map import family_map
from branchwise.core.fork.engine import fork
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.branch_map import COLUMN, LANE, MARGIN, Rect, lay_out


def test_lanes_follow_the_map_and_columns_the_turn_numbers(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    f = build_map_family(store)
    layout = lay_out(family_map(store, f.root), (f.edit, "e1"))
    nested = layout.placed((f.nested, 3))
    plain = layout.placed((f.plain, 3))
    assert nested is not None and plain is not None
    assert nested.rect.x == plain.rect.x == MARGIN + 2 * COLUMN  # turn 3, same column
    assert nested.lane == plain.lane + 1
    focus = layout.placed((f.edit, 3))
    assert focus is not None and focus.focus_turn and focus.in_focus_member
    assert layout.focus_key() == (f.edit, 3)
    # only what is in view: the top two lanes, first two columns
    seen = Rect(0, 0, MARGIN + COLUMN * 2 - 30, MARGIN + LANE * 2 - 10)
    assert {p.node.key for p in layout.nodes_in(seen)} == {
        (f.root, 1),
        (f.root, 2),
        (f.plain, 2),
    }
    assert len(layout.nodes) == 12 and len(layout.edges) == 7


def test_the_alternatives_to_a_first_prompt_are_siblings_of_it(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    f = build_map_family(store)
    first = fork(store, edit_request(store, f.root, "r1", "other"), "op-1").child_session_id
    layout = lay_out(family_map(store, f.root), (f.root, None))
    assert layout.parent((f.root, 1)) is None
    assert layout.sibling((f.root, 1), 1) == (first, 1)
    assert layout.sibling((first, 1), -1) == (f.root, 1)
    assert layout.parent((first, 1)) is None  # it leaves from the start, not from a turn
    assert layout.children((f.root, 2)) == [(f.root, 3), (f.regen, 3), (f.child, 1), (f.damaged, 3)]
