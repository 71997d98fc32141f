"""``merge_back``: a branch's conclusion appended to an ancestor, once per operation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers.forking import fork_at
from helpers.sessions import complete_turn

from branchwise.core.conversation.merge import (
    MAX_MERGE_CHARS,
    answers_of,
    demo_summary,
    merge_back,
    write_summary,
)
from branchwise.core.errors import BranchwiseError
from branchwise.core.projection.projection import MERGE_PREFIX
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.store.store import SessionStore
from branchwise.core.store.trash import Trash


class Family:
    """root (r1, r2); branch = fork at r1 + b1, b2; grandchild = fork of branch at b1 + g1."""

    def __init__(self, store: SessionStore) -> None:
        with store.create("root") as writer:
            for turn in ("r1", "r2"):
                complete_turn(writer, turn, f"ask {turn}")
            self.root = writer.session_id
        self.branch = fork_at(store, self.root, "r1", op="op-branch").child_session_id
        with store.open_writer(self.branch) as writer:
            for turn in ("b1", "b2"):
                complete_turn(writer, turn, f"ask {turn}")
        self.grandchild = fork_at(store, self.branch, "b1", op="op-grand").child_session_id
        with store.open_writer(self.grandchild) as writer:
            complete_turn(writer, "g1", "ask g1")


@pytest.fixture
def family(tmp_path: Path) -> tuple[SessionStore, Family]:
    store = SessionStore(tmp_path)
    return store, Family(store)


def _refused(store: SessionStore, session_id: str, code: str, call: object) -> None:
    before = store.read(session_id).projection.merges
    with pytest.raises(BranchwiseError) as info:
        call()  # type: ignore[operator]
    assert info.value.code == code, info.value.to_json()
    assert store.read(session_id).projection.merges == before


def test_an_answer_comes_back_as_its_own_item_and_as_context(
    family: tuple[SessionStore, Family],
) -> None:
    store, f = family
    content = answers_of(store, f.branch, ["b2"])
    assert content == "answer to ask b2"
    result = merge_back(store, f.branch, None, content, "answer", "op-m1")
    assert result.to_json() == {
        "parentSessionId": f.root,
        "mergeSequence": result.merge_sequence,
        "created": True,
    }
    parent = store.read(f.root).projection
    (merge,) = parent.merges
    assert merge["childSessionId"] == f.branch and merge["kind"] == "answer"
    assert merge["childBoundarySequence"] > 0 and merge["seq"] == result.merge_sequence
    assert parent.messages[-1].role == "merge" and parent.messages[-1].content == content
    assert parent.model_messages()[-1] == {"role": "user", "content": MERGE_PREFIX + content}
    assert store.read(f.branch).projection.merges == []  # the branch records nothing


def test_the_same_operation_is_one_merge_and_another_request_under_it_conflicts(
    family: tuple[SessionStore, Family],
) -> None:
    store, f = family
    first = merge_back(store, f.branch, f.root, "We chose Kyoto.", "note", "op-same")
    again = merge_back(store, f.branch, f.root, "We chose Kyoto.", "note", "op-same")
    assert (again.merge_sequence, again.created) == (first.merge_sequence, False)
    _refused(
        store,
        f.root,
        "operation_conflict",
        lambda: merge_back(store, f.branch, f.root, "Something else", "note", "op-same"),
    )
    assert len(store.read(f.root).projection.merges) == 1


def test_a_grandchild_can_bring_back_to_its_grandparent_but_not_to_a_cousin(
    family: tuple[SessionStore, Family], tmp_path: Path
) -> None:
    store, f = family
    merge_back(store, f.grandchild, f.root, "from deep down", "note", "op-deep")
    assert store.read(f.root).projection.merges[0]["childSessionId"] == f.grandchild
    cousin = fork_at(store, f.root, "r2", op="op-cousin").child_session_id
    _refused(
        store,
        cousin,
        "not_ancestor",
        lambda: merge_back(store, f.grandchild, cousin, "x", "note", "op-x"),
    )
    _refused(
        store, f.root, "not_ancestor", lambda: merge_back(store, f.root, None, "x", "note", "op")
    )


@pytest.mark.parametrize(
    ("content", "kind", "operation"),
    [
        ("", "note", "op"),
        ("   ", "note", "op"),
        ("x" * (MAX_MERGE_CHARS + 1), "note", "op"),
        ("fine", "poem", "op"),
        ("fine", "note", ""),
        ("fine", "note", "o" * 201),
    ],
)
def test_bad_requests_are_refused_and_write_nothing(
    family: tuple[SessionStore, Family], content: str, kind: str, operation: str
) -> None:
    store, f = family
    _refused(
        store,
        f.root,
        "invalid_merge",
        lambda: merge_back(store, f.branch, None, content, kind, operation),
    )


def test_a_trashed_branch_or_parent_is_refused_in_its_own_words(
    family: tuple[SessionStore, Family],
) -> None:
    store, f = family
    Trash(store).trash(f.grandchild)
    with pytest.raises(BranchwiseError) as info:
        merge_back(store, f.grandchild, None, "x", "note", "op-t")
    assert info.value.code == "session_trashed"
    Trash(store).trash(f.root)
    with pytest.raises(BranchwiseError) as info:
        merge_back(store, f.branch, f.root, "x", "note", "op-t2")
    assert info.value.code == "session_trashed"


def test_a_fork_of_the_parent_after_a_merge_inherits_it(
    family: tuple[SessionStore, Family],
) -> None:
    store, f = family
    merge_back(store, f.branch, None, "kept", "note", "op-k")
    with store.open_writer(f.root) as writer:
        complete_turn(writer, "r3", "after the merge")
    later = fork_at(store, f.root, "r3", op="op-later").child_session_id
    inherited = store.read(later).projection
    assert [m["content"] for m in inherited.merges] == ["kept"]
    assert any(m["content"] == MERGE_PREFIX + "kept" for m in inherited.model_messages())


def test_the_demo_responder_writes_a_deterministic_summary_of_the_branchs_own_turns(
    family: tuple[SessionStore, Family],
) -> None:
    store, f = family
    projection = store.read(f.branch).projection
    summary = asyncio.run(write_summary(projection, DemoProvider()))
    assert summary == demo_summary([("ask b1", "answer to ask b1"), ("ask b2", "answer to ask b2")])
    assert summary.splitlines() == [
        "Summary of the branch (2 turns):",
        "- ask b1 → answer to ask b1",
        "- ask b2 → answer to ask b2",
    ]
