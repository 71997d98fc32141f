"""``compare``: any two conversations of one tree, from their last common fork point."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.forking import fork_at
from helpers.sessions import complete_turn

from branchwise.core.conversation.compare import compare, compare_all
from branchwise.core.errors import NotRelated
from branchwise.core.lineage import create_child
from branchwise.core.store.store import SessionStore


class Tree:
    """root: r1 r2 r3; a = fork at r1 + a1; b = fork at r2 + b1; c = fork of a at a1 + c1."""

    def __init__(self, store: SessionStore) -> None:
        with store.create("root") as writer:
            self.boundaries = {t: complete_turn(writer, t, f"ask {t}") for t in ("r1", "r2", "r3")}
            self.root = writer.session_id
        self.a = self._branch(store, self.root, "r1", "a1")
        self.b = self._branch(store, self.root, "r2", "b1")
        self.c = self._branch(store, self.a, "a1", "c1")

    @staticmethod
    def _branch(store: SessionStore, source: str, at: str, own: str) -> str:
        child = fork_at(store, source, at, op=f"op-{own}").child_session_id
        with store.open_writer(child) as writer:
            complete_turn(writer, own, f"ask {own}")
        return child


@pytest.fixture
def tree(tmp_path: Path) -> tuple[SessionStore, Tree]:
    store = SessionStore(tmp_path)
    return store, Tree(store)


def _turn_ids(side: dict[str, object]) -> list[str]:
    return [t["turnId"] for t in side["turns"]]  # type: ignore[index, union-attr]


def test_siblings_split_at_the_earlier_fork_point(tree: tuple[SessionStore, Tree]) -> None:
    store, t = tree
    result = compare(store, t.a, t.b).to_json()
    assert result["common"] == {
        "sessionId": t.root,
        "turnId": "r1",
        "boundarySequence": t.boundaries["r1"],
    }
    assert _turn_ids(result["left"]) == ["a1"]
    assert _turn_ids(result["right"]) == ["r2", "b1"]  # r2 is what b has and a lacks
    assert result["right"]["turns"][0] == {
        "turnId": "r2",
        "prompt": "ask r2",
        "answer": "answer to ask r2",
    }
    assert (result["left"]["sessionId"], result["right"]["sessionId"]) == (t.a, t.b)


def test_a_parent_and_its_branch(tree: tuple[SessionStore, Tree]) -> None:
    store, t = tree
    result = compare(store, t.root, t.b).to_json()
    assert result["common"]["turnId"] == "r2"
    assert _turn_ids(result["left"]) == ["r3"]
    assert _turn_ids(result["right"]) == ["b1"]


def test_a_conversation_and_a_branch_of_its_branch_and_cousins(
    tree: tuple[SessionStore, Tree],
) -> None:
    store, t = tree
    deep = compare(store, t.a, t.c).to_json()
    assert deep["common"]["sessionId"] == t.a and deep["common"]["turnId"] == "a1"
    assert _turn_ids(deep["left"]) == [] and _turn_ids(deep["right"]) == ["c1"]
    cousins = compare(store, t.c, t.b).to_json()
    assert cousins["common"]["sessionId"] == t.root and cousins["common"]["turnId"] == "r1"
    assert _turn_ids(cousins["left"]) == ["a1", "c1"]
    assert _turn_ids(cousins["right"]) == ["r2", "b1"]


def test_a_child_compares_by_its_spawning_turn(tree: tuple[SessionStore, Tree]) -> None:
    store, t = tree
    child = create_child(store, t.root, {"turnId": "r2"}, "helper").child_session_id
    with store.open_writer(child) as writer:
        complete_turn(writer, "k1", "sub task")
    result = compare(store, child, t.root).to_json()
    assert result["common"]["sessionId"] == t.root and result["common"]["turnId"] == "r2"
    assert _turn_ids(result["left"]) == ["k1"]
    assert _turn_ids(result["right"]) == ["r3"]


def test_a_conversation_with_itself_has_nothing_after_its_last_turn(
    tree: tuple[SessionStore, Tree],
) -> None:
    store, t = tree
    result = compare(store, t.b, t.b).to_json()
    assert result["common"]["sessionId"] == t.b and result["common"]["turnId"] == "b1"
    assert _turn_ids(result["left"]) == _turn_ids(result["right"]) == []


def test_conversations_of_different_trees_are_not_related(
    tree: tuple[SessionStore, Tree],
) -> None:
    store, t = tree
    with store.create("elsewhere") as writer:
        complete_turn(writer, "x1")
        other = writer.session_id
    with pytest.raises(NotRelated) as info:
        compare(store, t.a, other)
    assert info.value.code == "not_related"


def test_several_conversations_split_at_the_earliest_point_of_all(
    tree: tuple[SessionStore, Tree],
) -> None:
    store, t = tree
    result = compare_all(store, [t.root, t.a, t.b, t.c])
    assert result.common is not None and result.common.turn_id == "r1"
    assert [[turn.turn_id for turn in side.turns] for side in result.sides] == [
        ["r2", "r3"],
        ["a1"],
        ["r2", "b1"],
        ["a1", "c1"],
    ]
    # Each turn keeps its number in its own transcript (inherited turns count).
    assert [[turn.number for turn in side.turns] for side in result.sides] == [
        [2, 3],
        [2],
        [2, 3],
        [2, 3],
    ]


def test_several_conversations_of_different_trees_are_refused(
    tree: tuple[SessionStore, Tree],
) -> None:
    store, t = tree
    with store.create("elsewhere") as writer:
        complete_turn(writer, "e1", "unrelated")
        other = writer.session_id
    with pytest.raises(NotRelated):
        compare_all(store, [t.a, t.b, other])
