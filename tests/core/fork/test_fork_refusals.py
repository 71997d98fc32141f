"""Fork typed refusals: each one names its reason and leaves no trace."""

from __future__ import annotations

import pytest
from helpers.forking import fork_at, refused
from helpers.sessions import commits_of, complete_turn, legacy_session, session_with_turns

from branchwise.core.errors import InvalidForkRequest
from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import fork_targets
from branchwise.core.projection import events as ev
from branchwise.core.store.publish import replace_log
from branchwise.core.store.store import SessionStore


def test_open_trailing_turn_leaves_every_earlier_turn_forkable(store: SessionStore) -> None:
    with store.create("s") as writer:
        complete_turn(writer, "t0")
        complete_turn(writer, "t1")
        writer.commit([ev.turn_start("t2"), ev.user_message("u2", "running")])
        source = writer.session_id
        first = fork_at(store, source, "t0", "op-a")
        second = fork_at(store, source, "t1", "op-b")
        refused(store, "turn_open", lambda: fork(store, ForkRequest(source, "t2", 0, 1), "op-c"))
        last_seq = writer.projection.last_seq
        refused(
            store, "turn_open", lambda: fork(store, ForkRequest(source, "t2", last_seq, 1), "op-c")
        )
    assert len(commits_of(store, first.child_session_id)) < len(
        commits_of(store, second.child_session_id)
    )


def test_unknown_turn_is_refused_not_redirected_to_the_newest_turn(store: SessionStore) -> None:
    source = session_with_turns(store, 2)
    newest = fork_targets(store, source).targets[-1]
    error = refused(
        store,
        "unknown_turn",
        lambda: fork(store, ForkRequest(source, "t9", newest.boundary_sequence or 0, 1), "op-1"),
    )
    assert error.details["turnId"] == "t9"


@pytest.mark.parametrize("what", ["interaction", "tool"])
def test_authority_left_open_by_the_closing_commit_is_refused(
    store: SessionStore, what: str
) -> None:
    opened = (
        {"type": "interaction/request", "interactionId": "i1", "kind": "approval"}
        if what == "interaction"
        else {"type": "tool/call", "callId": "c1", "name": "ls", "args": {}}
    )
    with store.create("s") as writer:
        writer.commit([ev.turn_start("t0"), ev.user_message("u0", "hi")])
        closing = writer.commit(
            [ev.assistant_message("a0", "ok", "demo"), ev.turn_end("t0", "completed"), opened]
        )
        source = writer.session_id
    error = refused(
        store,
        "active_authority",
        lambda: fork(store, ForkRequest(source, "t0", closing[-1]["seq"], 1), "op"),
    )
    assert error.details["openAuthority"] == [opened.get("interactionId", opened.get("callId"))]


def test_a_replaced_log_or_a_moved_boundary_is_stale(store: SessionStore) -> None:
    source = session_with_turns(store, 3)
    old = fork_targets(store, source)
    t1 = old.target("t1")
    assert t1 is not None and t1.boundary_sequence is not None
    refused(
        store,
        "stale_source",
        lambda: fork(store, ForkRequest(source, "t1", t1.boundary_sequence - 3, 1), "op-1"),
    )
    assert replace_log(store, source, commits_of(store, source)[:-2]) == 2  # a rewind
    error = refused(
        store,
        "stale_source",
        lambda: fork(store, ForkRequest(source, "t1", t1.boundary_sequence, 1), "op-1"),
    )
    assert error.details["generation"] == 2
    assert fork_at(store, source, "t1").created


def test_message_only_history_is_unverifiable(store: SessionStore) -> None:
    source = legacy_session(store)
    refused(store, "unverifiable", lambda: fork(store, ForkRequest(source, "t0", 2, 1), "op-1"))


def test_missing_source_taken_child_id_and_bad_arguments(store: SessionStore) -> None:
    source = session_with_turns(store, 1)
    other = session_with_turns(store, 1)
    boundary = fork_targets(store, source).targets[0].boundary_sequence or 0
    refused(
        store,
        "source_not_found",
        lambda: fork(store, ForkRequest("0000000000-nothing", "t0", boundary, 1), "op-1"),
    )
    refused(
        store,
        "duplicate_child",
        lambda: fork(store, ForkRequest(source, "t0", boundary, 1, other), "op-1"),
    )
    refused(
        store,
        "invalid_session_id",
        lambda: fork(store, ForkRequest("../x", "t0", boundary, 1), "op"),
    )
    for boundary_sequence, generation, op in [
        (boundary, 1, ""),
        (boundary, True, "op"),
        ("7", 1, "op"),
    ]:
        with pytest.raises(InvalidForkRequest):
            fork(store, ForkRequest(source, "t0", boundary_sequence, generation), op)  # type: ignore[arg-type]
    with pytest.raises(InvalidForkRequest):
        fork(store, ForkRequest(source, "t0", boundary, 1), "op-3", title=7)  # type: ignore[arg-type]
    named = fork(store, ForkRequest(source, "t0", boundary, 1, "0000000000-named"), "op-2")
    assert named.child_session_id == "0000000000-named"


@pytest.mark.parametrize("value", [-1, 2**63, 2**64 - 1, 2**64, 10**30])
@pytest.mark.parametrize("field", ["boundarySequence", "expectedGeneration"])
def test_numbers_outside_the_stored_range_are_refused_before_anything(
    store: SessionStore, field: str, value: int
) -> None:
    source = session_with_turns(store, 1)
    good = ForkRequest(
        source, "t0", fork_targets(store, source).targets[0].boundary_sequence or 0, 1
    )
    bad = (
        ForkRequest(source, "t0", value, 1)
        if field == "boundarySequence"
        else ForkRequest(source, "t0", good.boundary_sequence, value)
    )
    error = refused(store, "invalid_fork_request", lambda: fork(store, bad, "op-big"))
    assert error.details["field"] == field
    assert not (store.root / "fork-index").exists()
    assert fork(store, good, "op-big").created  # the operation id was not spent


def test_an_empty_child_id_is_refused_not_generated(store: SessionStore) -> None:
    source = session_with_turns(store, 1)
    boundary = fork_targets(store, source).targets[0].boundary_sequence or 0
    refused(
        store,
        "invalid_session_id",
        lambda: fork(store, ForkRequest(source, "t0", boundary, 1, ""), "op"),
    )
