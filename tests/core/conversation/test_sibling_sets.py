"""The sibling sets at a turn, from manifests alone (docs/architecture.md, "Alternatives").

Manifests are built in memory: the rule reads nothing else, which is the
point (no log read per row, 1,000 branches in a family are a list walk).
"""

from __future__ import annotations

from branchwise.core.conversation.alternatives import (
    alternatives_by_turn,
    alternatives_of,
    turn_after,
)
from branchwise.core.lineage import LineageIndex
from branchwise.core.store.manifest import BranchOrigin, Manifest, ParentLink


def root(sid: str, at: float = 0.0) -> Manifest:
    return Manifest(session_id=sid, title=sid, created_at=at)


def fork(
    sid: str, parent: str, turn: str | None, at: float, origin: BranchOrigin | None = None
) -> Manifest:
    link = ParentLink(parent, "fork", turn_id=turn, origin=origin)
    return Manifest(session_id=sid, title=sid, kind="fork", created_at=at, parent=link)


def members(index: LineageIndex, sid: str, point: str | None) -> list[str]:
    return [m.session_id for m in alternatives_of(index, sid)[point].members]


# The root's turns are t1, t2, t3; "edit" edits t2 (it forks after t1), "plain" is a
# branch taken at t1, "late" a branch taken at t2 (it differs at t3).
EDIT_T2 = BranchOrigin("edit", "t2", "Where to stay cheaply?")


def family() -> LineageIndex:
    return LineageIndex.build(
        [
            root("trip"),
            fork("plain", "trip", "t1", 1.0),
            fork("edit", "trip", "t1", 2.0, EDIT_T2),
            fork("late", "trip", "t2", 3.0),
            Manifest(
                session_id="helper",
                title="helper",
                kind="child",
                created_at=4.0,
                parent=ParentLink("trip", "child", turn_id="t1"),
            ),
        ]
    )


def test_edits_and_branches_at_the_same_point_are_one_set_with_the_original_first() -> None:
    index = family()
    assert members(index, "trip", "t1") == ["trip", "plain", "edit"]
    assert members(index, "trip", "t2") == ["trip", "late"]
    # Every member sees the very same set; a sub-conversation is no alternative.
    assert members(index, "plain", "t1") == ["trip", "plain", "edit"]
    assert members(index, "edit", "t1") == ["trip", "plain", "edit"]
    assert set(alternatives_of(index, "plain")) == {"t1"}
    assert alternatives_of(index, "helper") == {}


def test_a_fork_of_a_fork_at_the_same_point_joins_its_parents_set() -> None:
    index = family()
    index.put(fork("edit-again", "edit", "t1", 5.0, EDIT_T2))
    index.put(fork("after-edit", "edit", "e2", 6.0))  # a branch at the edit's own turn
    expected = ["trip", "plain", "edit", "edit-again"]
    assert members(index, "trip", "t1") == expected
    assert members(index, "edit-again", "t1") == expected
    assert members(index, "edit", "e2") == ["edit", "after-edit"]
    assert set(alternatives_of(index, "edit")) == {"t1", "e2"}


def test_sets_sit_on_the_turn_after_the_shared_one() -> None:
    index = family()
    rows = [(None, None), ("t1", 1), ("t2", 2), ("t3", 3)]  # imported history first
    placed = alternatives_by_turn(alternatives_of(index, "trip"), rows)
    assert {turn: len(found.members) for turn, found in placed.items()} == {"t2": 3, "t3": 2}
    # The edit's rows: t1 shared, then its own e2 at the same place as the root's t2.
    placed = alternatives_by_turn(alternatives_of(index, "edit"), [("t1", 1), ("e2", 2)])
    assert list(placed) == ["e2"]
    # A branch that has not asked its own turn yet has nowhere to show it.
    assert alternatives_by_turn(alternatives_of(index, "plain"), [("t1", 1)]) == {}
    # A transcript opened on a later page knows turn 1 only when it holds it.
    assert turn_after([("t5", 5), ("t6", 6)], None) is None
    assert turn_after([("t1", 1), ("t2", 2)], None) == "t1"


def test_stepping_stops_at_either_end() -> None:
    found = alternatives_of(family(), "plain")["t1"]
    assert found.position("plain") == 1
    assert found.step("plain", -1) is not None and found.step("plain", -1).session_id == "trip"
    assert found.step("trip", -1) is None and found.step("edit", 1) is None
    assert found.position("late") is None


def test_a_damaged_parent_loop_ends_the_walk() -> None:
    loop = LineageIndex.build([fork("a", "b", "t1", 1.0), fork("b", "a", "t1", 2.0)])
    found = alternatives_of(loop, "a")["t1"]
    assert sorted(m.session_id for m in found.members) == ["a", "b"]


def test_a_thousand_branches_are_read_from_the_index_in_one_walk() -> None:
    manifests = [root("trip")]
    manifests += [fork(f"b{n:04}", "trip", "t1", float(n)) for n in range(1, 1001)]
    index = LineageIndex.build(manifests)
    found = alternatives_of(index, "b0500")["t1"]
    assert len(found.members) == 1001
    assert found.position("b0500") == 500
    assert [m.session_id for m in found.members[:3]] == ["trip", "b0001", "b0002"]
