"""The branch map of a family: nodes per own turn, edges where members leave and merge."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.family import MapFamily, build_map_family

from branchwise.core.conversation.family_map import FamilyMap, family_map
from branchwise.core.errors import BranchwiseError
from branchwise.core.store.store import SessionStore


@pytest.fixture
def family(tmp_path: Path) -> tuple[SessionStore, MapFamily]:
    store = SessionStore(tmp_path)
    return store, build_map_family(store)


def _edges(found: FamilyMap) -> set[tuple[tuple[str, int], tuple[str, int], str]]:
    return {(e.source, e.target, e.kind) for e in found.edges}


def test_every_member_names_the_same_map(family: tuple[SessionStore, MapFamily]) -> None:
    store, f = family
    maps = [family_map(store, sid).to_json() for sid in (f.root, f.nested, f.child, f.damaged)]
    assert all(m == maps[0] for m in maps)
    assert maps[0]["rootSessionId"] == f.root


def test_nodes_are_own_turns_and_edges_leave_from_the_right_turn(
    family: tuple[SessionStore, MapFamily],
) -> None:
    store, f = family
    found = family_map(store, f.root)
    nodes = {(n.session_id, n.turn_index): (n.turn_id, n.kind) for n in found.nodes}
    assert nodes[(f.root, 1)] == ("r1", "turn") and nodes[(f.root, 3)] == ("r3", "turn")
    # inherited turns are drawn once, on the ancestor that wrote them
    assert (f.plain, 1) not in nodes and nodes[(f.plain, 2)] == ("p1", "turn")
    assert nodes[(f.nested, 3)] == (None, "empty")
    assert nodes[(f.child, 1)] == ("c1", "turn")
    assert nodes[(f.damaged, 3)][1] == "damaged"
    assert f.trashed not in {n.session_id for n in found.nodes}
    assert _edges(found) == {
        ((f.root, 1), (f.plain, 2), "fork"),
        ((f.plain, 2), (f.nested, 3), "fork"),
        # an edit of turn 2 leaves from turn 1, a regenerate of turn 3 from turn 2
        ((f.root, 1), (f.edit, 2), "edit"),
        ((f.root, 2), (f.regen, 3), "regenerate"),
        ((f.root, 2), (f.child, 1), "child"),
        ((f.root, 2), (f.damaged, 3), "fork"),
        # the branch's last turn was brought back after the root's turn 3
        ((f.plain, 3), (f.root, 3), "merge"),
    }


def test_json_shape_is_exactly_the_documented_one(family: tuple[SessionStore, MapFamily]) -> None:
    store, f = family
    answer = family_map(store, f.edit).to_json()
    assert set(answer) == {"rootSessionId", "nodes", "edges"}
    assert all(
        set(n) == {"sessionId", "turnIndex", "turnId", "label", "title", "kind"}
        for n in answer["nodes"]
    )
    assert all(set(e) == {"from", "to", "kind"} for e in answer["edges"])
    assert FamilyMap.from_json(answer).to_json() == answer


def test_a_fork_taken_at_an_inherited_turn_leaves_from_its_writer(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    f = build_map_family(store)
    from helpers.forking import fork_at

    deep = fork_at(store, f.plain, "r1", op="op-deep").child_session_id
    assert ((f.root, 1), (deep, 2), "fork") in _edges(family_map(store, f.plain))


def test_an_edit_of_the_first_prompt_leaves_from_the_start(tmp_path: Path) -> None:
    from branchwise.core.conversation.ask_again import edit_request
    from branchwise.core.fork.engine import fork

    store = SessionStore(tmp_path)
    f = build_map_family(store)
    first = fork(store, edit_request(store, f.root, "r1", "other"), "op-first").child_session_id
    found = family_map(store, first)
    assert ((f.root, 0), (first, 1), "edit") in _edges(found)
    assert '"' + f.root + '#0" [shape=point]' in found.to_dot()


def test_an_unknown_or_trashed_id_is_a_typed_error(family: tuple[SessionStore, MapFamily]) -> None:
    store, f = family
    for missing in (f.trashed, "01a2505c-0000-7000-8000-000000000000"):
        with pytest.raises(BranchwiseError) as info:
            family_map(store, missing)
        assert info.value.code == "session_not_found"
    with pytest.raises(BranchwiseError) as info:
        family_map(store, "not an id")
    assert info.value.code == "invalid_session_id"


def test_a_branch_of_a_trashed_parent_heads_its_own_family(tmp_path: Path) -> None:
    from branchwise.core.store.trash import Trash

    store = SessionStore(tmp_path)
    f = build_map_family(store)
    Trash(store).trash(f.plain)
    assert family_map(store, f.nested).root_session_id == f.nested
    found = family_map(store, f.root)
    assert f.plain not in {n.session_id for n in found.nodes}
    assert not [e for e in found.edges if e.kind == "merge"]


def test_a_chain_two_thousand_deep_maps_without_recursion(tmp_path: Path) -> None:
    from helpers.sessions import write_child_chain

    store = SessionStore(tmp_path)
    chain = write_child_chain(store, 2000)
    found = family_map(store, chain[-1])
    assert len({n.session_id for n in found.nodes}) == 2000
    assert len(found.edges) == 1999


def test_a_turn_being_written_is_running_and_a_crash_left_one_is_not(tmp_path: Path) -> None:
    from branchwise.core.projection import events as ev

    store = SessionStore(tmp_path)
    f = build_map_family(store)
    with store.open_writer(f.edit) as writer:
        writer.commit([ev.turn_start("live"), ev.user_message("u-live", "still going")])
        nodes = {n.key: n.kind for n in family_map(store, f.root).nodes}
        assert nodes[(f.edit, 4)] == "running" and nodes[(f.edit, 3)] == "turn"
    # the writer let go: nothing writes it now (a crash would leave it so too)
    assert {n.key: n.kind for n in family_map(store, f.root).nodes}[(f.edit, 4)] == "turn"
