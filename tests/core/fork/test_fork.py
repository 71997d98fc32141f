"""Fork: whole-commit cuts, idempotency, untouched sources."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers.forking import fork_at, refused
from helpers.sessions import (
    HELPER,
    commits_of,
    complete_turn,
    log_scan,
    prefix_projection,
    read_only,
    session_layouts,
    session_with_turns,
    strip,
    tree_hashes,
    visible_sessions,
    write_layout,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from branchwise.core.errors import BranchwiseError
from branchwise.core.fork.engine import ForkResult, fork
from branchwise.core.fork.operations import ForkRequest, OperationIndex
from branchwise.core.fork.targets import fork_targets
from branchwise.core.projection import events as ev
from branchwise.core.store.publish import replace_log
from branchwise.core.store.store import SessionStore


def test_cold_fork_inherits_exactly_the_prefix_through_the_target_turn(
    store: SessionStore,
) -> None:
    source = session_with_turns(store, 3)
    parent = commits_of(store, source)
    result = fork_at(store, source, "t1")
    assert result == ForkResult(result.child_session_id, True, "op-1")
    child = commits_of(store, result.child_session_id)
    boundary = fork_targets(store, source).target("t1").boundary_sequence  # type: ignore[union-attr]
    # The prefix is inherited verbatim (docs/storage.md, "Seeds"): the same commits, seqs and usage
    # events; the child's usage total counts only what follows seedLength.
    inherited = [commit for commit in parent if commit[-1]["seq"] <= boundary]
    assert child[:-1] == inherited
    seqs = [e["seq"] for commit in child for e in commit]
    assert seqs == list(range(1, len(seqs) + 1)) and seqs[-1] == boundary + 1
    assert store.read(result.child_session_id).projection.input_tokens == 0
    assert not any(e.get("turnId") == "t2" for commit in child for e in commit)
    (fork_event,) = child[-1]
    assert strip(fork_event) | {"ts": 0} == {
        "ts": 0,
        "type": "session/fork",
        "parentSessionId": source,
        "parentGeneration": 1,
        "turnId": "t1",
        "boundarySequence": boundary,
        "seedLength": len(seqs) - 1,
        "operationId": "op-1",
    }
    manifest = store.manifest(result.child_session_id)
    assert manifest.kind == "fork" and manifest.root_session_id == source
    assert manifest.parent is not None and manifest.parent.to_json() == {
        "sessionId": source,
        "kind": "fork",
        "turnId": "t1",
        "boundarySequence": boundary,
        "generation": 1,
    }
    assert manifest.seed_length == len(seqs) - 1 and manifest.created_by_operation == "op-1"
    assert commits_of(store, source) == parent  # the source is never written


def test_child_context_equals_the_parent_at_the_boundary(store: SessionStore) -> None:
    blob_before, blob_after = b"file v1", b"file v2"
    names = [hashlib.sha256(b).hexdigest() for b in (blob_before, blob_after)]
    with store.create("s") as writer:
        blobs = writer.directory / "blobs"
        blobs.mkdir()
        for name, data in zip(names, (blob_before, blob_after), strict=True):
            (blobs / name).write_bytes(data)
        complete_turn(writer, "t0", "first", tokens=10)
        writer.commit([{"type": "checkpoint", "checkpointId": "k1", "blobs": [names[0]]}])
        boundary = complete_turn(writer, "t1", "second", tokens=20)
        writer.commit([{"type": "checkpoint", "checkpointId": "k2", "blobs": [names[1]]}])
        complete_turn(writer, "t2", "third", tokens=30)
        source = writer.session_id
    child = store.read(fork_at(store, source, "t1").child_session_id)
    parent_then = prefix_projection(store, source, boundary)
    assert child.projection.model_messages() == parent_then.model_messages()
    assert [m.content for m in child.projection.messages][-1] == "answer to second"
    assert (parent_then.input_tokens, parent_then.output_tokens) == (30, 60)
    assert (child.projection.input_tokens, child.projection.output_tokens) == (0, 0)
    assert child.projection.checkpoints == {"k1": [names[0]]}
    child_blobs = store.session_dir(child.session_id) / "blobs"
    assert (child_blobs / names[0]).read_bytes() == blob_before
    assert not (child_blobs / names[1]).exists()


def test_the_cut_covers_the_whole_commit_that_closed_the_turn(store: SessionStore) -> None:
    with store.create("s") as writer:
        writer.commit([ev.turn_start("t0"), ev.user_message("u0", "hi")])
        closing = writer.commit(
            [
                ev.assistant_message("a0", "hello", "demo"),
                ev.turn_end("t0", "completed"),
                ev.usage(1, 2, "demo"),
                {"type": "session/title", "title": "renamed with the answer"},
                {"type": "checkpoint", "checkpointId": "k0", "blobs": []},
            ]
        )
        complete_turn(writer, "t1")
        source = writer.session_id
    end_seq, boundary = closing[1]["seq"], closing[-1]["seq"]
    refused(
        store,
        "boundary_not_atomic",
        lambda: fork(store, ForkRequest(source, "t0", end_seq, 1), "op-1"),
    )
    child = fork(store, ForkRequest(source, "t0", boundary, 1), "op-1").child_session_id
    commits = commits_of(store, child)
    assert [e["type"] for e in commits[-2]] == [
        "message/assistant",
        "turn/end",
        "usage",  # verbatim; not counted in the child (seq <= seedLength)
        "session/title",
        "checkpoint",
    ]
    assert store.read(child).projection.title == "renamed with the answer"


def test_authority_resolved_by_the_same_atomic_commit_is_allowed(store: SessionStore) -> None:
    with store.create("s") as writer:
        writer.commit([ev.turn_start("t0"), ev.user_message("u0", "hi")])
        writer.commit([{"type": "interaction/request", "interactionId": "i1", "kind": "approval"}])
        writer.commit(
            [
                {"type": "interaction/resolve", "interactionId": "i1"},
                ev.assistant_message("a0", "approved and done", "demo"),
                ev.turn_end("t0", "completed"),
            ]
        )
        source = writer.session_id
    child = fork_at(store, source, "t0").child_session_id
    assert store.read(child).projection.open_interactions == {}


def test_retry_with_the_same_operation_returns_the_same_child(store: SessionStore) -> None:
    source = session_with_turns(store, 2)
    first = fork_at(store, source, "t0", "op-1")
    again = fork_at(store, source, "t0", "op-1")
    other = fork_at(store, source, "t0", "op-2")
    assert again == ForkResult(first.child_session_id, False, "op-1")
    assert other.created and other.child_session_id != first.child_session_id
    boundary = fork_targets(store, source).targets[1].boundary_sequence or 0
    before = visible_sessions(store)
    with pytest.raises(BranchwiseError) as conflict:
        fork(store, ForkRequest(source, "t1", boundary, 1), "op-1")
    assert conflict.value.code == "operation_conflict" and visible_sessions(store) == before


def test_retry_finds_its_child_even_after_the_source_moved_on(store: SessionStore) -> None:
    source = session_with_turns(store, 2)
    first = fork_at(store, source, "t0", "op-1")
    boundary = first and store.manifest(first.child_session_id).parent.boundary_sequence  # type: ignore[union-attr]
    replace_log(store, source, commits_of(store, source)[:3])
    again = fork(store, ForkRequest(source, "t0", boundary, 1), "op-1")
    assert again == ForkResult(first.child_session_id, False, "op-1")


def test_a_named_fork_publishes_its_title_in_its_first_own_commit(store: SessionStore) -> None:
    source = session_with_turns(store, 2)
    boundary = fork_targets(store, source).targets[0].boundary_sequence or 0
    request = ForkRequest(source, "t0", boundary, 1)
    result = fork(store, request, "op-1", title="src (branch 1)")
    child = result.child_session_id
    assert result.created and store.manifest(child).title == "src (branch 1)"
    *inherited, own = commits_of(store, child)
    assert [e["type"] for e in own] == ["session/fork", "session/title"]
    assert own[1]["title"] == "src (branch 1)" and own[1]["seq"] == own[0]["seq"] + 1
    assert own[0]["seedLength"] == inherited[-1][-1]["seq"] == own[0]["seq"] - 1
    projection = store.read(child).projection
    assert projection.title == "src (branch 1)" and projection.fork is not None
    assert store.manifest(source).title == store.read(source).projection.title == "src"
    # A retry gets the child it made, untouched, whatever title it asks for.
    files = tree_hashes(store.session_dir(child))
    assert fork(store, request, "op-1", title="another") == ForkResult(child, False, "op-1")
    assert tree_hashes(store.session_dir(child)) == files
    # Without a title the child keeps its source's, and its own commit is the fork alone.
    plain = fork(store, request, "op-2").child_session_id
    assert store.manifest(plain).title == "src"
    assert [e["type"] for e in commits_of(store, plain)[-1]] == ["session/fork"]


def test_a_reservation_left_by_a_crash_is_finished_with_the_same_child(
    store: SessionStore,
) -> None:
    source = session_with_turns(store, 1)
    boundary = fork_targets(store, source).targets[0].boundary_sequence or 0
    reserved = ForkRequest(source, "t0", boundary, 1, "0000000000-reserved")
    OperationIndex(store.root).reserve("op-1", reserved)  # as if killed right after this
    assert fork(store, ForkRequest(source, "t0", boundary, 1), "op-1") == ForkResult(
        "0000000000-reserved", True, "op-1"
    )
    assert fork(store, ForkRequest(source, "t0", boundary, 1), "op-1").created is False


def test_concurrent_calls_of_one_operation_make_one_child(store: SessionStore) -> None:
    source = session_with_turns(store, 3)
    boundary = fork_targets(store, source).targets[2].boundary_sequence or 0
    results: list[ForkResult] = []
    start = threading.Barrier(4)

    def run() -> None:
        start.wait()
        results.append(fork(store, ForkRequest(source, "t2", boundary, 1), "op-same"))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({r.child_session_id for r in results}) == 1
    assert sorted(r.created for r in results) == [False, False, False, True]
    assert len(visible_sessions(store)) == 2


def test_forking_a_read_only_source_leaves_every_byte_and_gives_a_writable_child(
    store: SessionStore,
) -> None:
    blob = b"snapshot of a file"
    name = hashlib.sha256(blob).hexdigest()
    with store.create("s") as writer:
        (writer.directory / "blobs").mkdir()
        (writer.directory / "blobs" / name).write_bytes(blob)
        complete_turn(writer, "t0")
        writer.commit([{"type": "checkpoint", "checkpointId": "k", "blobs": [name]}])
        complete_turn(writer, "t1")
        source = writer.session_id
    directory = store.session_dir(source)
    hashes = tree_hashes(directory)
    with read_only(directory) as strict:
        assert strict, "cannot make the source really read-only here"
        result = fork_at(store, source, "t1")
    assert tree_hashes(directory) == hashes
    with store.open_writer(result.child_session_id) as child:
        complete_turn(child, "t-child", "a new direction")
    child_state = store.read(result.child_session_id).projection
    assert [t.turn_id for t in child_state.turns] == ["t0", "t1", "t-child"]
    blob_copy = store.session_dir(result.child_session_id) / "blobs" / name
    assert blob_copy.read_bytes() == blob


def test_forking_while_another_process_appends_does_not_disturb_it(store: SessionStore) -> None:
    source = session_with_turns(store, 2)
    appender = subprocess.Popen(
        [sys.executable, str(HELPER), "append", str(store.root), source, "200"],
        stdout=subprocess.PIPE,
        text=True,
    )
    children: list[tuple[str, str]] = []
    try:
        assert appender.stdout is not None and appender.stdout.readline() == "ready\n"
        while appender.poll() is None or len(children) < 3:
            answer = fork_targets(store, source)
            target = [t for t in answer.targets if t.available][-1]
            result = fork(
                store,
                ForkRequest(
                    source, target.turn_id, target.boundary_sequence or 0, answer.generation
                ),
                f"op-{len(children)}",
            )
            children.append((result.child_session_id, target.turn_id))
        assert appender.wait(timeout=60) == 0
        assert appender.stdout.read() == "done\n"
    finally:
        appender.kill()
        appender.wait()
        appender.stdout.close()  # type: ignore[union-attr]
    scan = log_scan(store.session_dir(source))
    assert scan.corruption is None and scan.torn_tail is None
    assert len(store.read(source).projection.turns) == 202
    assert len({turn for _, turn in children}) > 1  # forks saw the session grow
    for child_id, turn_id in children:
        turns = store.read(child_id).projection.turns
        assert turns[-1].turn_id == turn_id and not any(t.is_open for t in turns)


def test_forks_of_forks_keep_the_root(store: SessionStore) -> None:
    source = session_with_turns(store, 2)
    child = fork_at(store, source, "t1", "op-1").child_session_id
    with store.open_writer(child) as writer:
        complete_turn(writer, "t-more")
    grandchild = fork_at(store, child, "t-more", "op-2").child_session_id
    manifest = store.manifest(grandchild)
    assert manifest.root_session_id == source
    assert manifest.parent is not None and manifest.parent.session_id == child
    turns = store.read(grandchild).projection.turns
    assert [t.turn_id for t in turns] == ["t0", "t1", "t-more"]


def _child_view(store: SessionStore, session_id: str) -> list[tuple[Any, ...]]:
    projection = store.read(session_id).projection
    return [(t.turn_id, t.message_id, t.end_reason, t.open_authority) for t in projection.turns]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=session_layouts(), data=st.data())
def test_any_available_target_forks_to_the_parent_prefix(
    layout: list[list[dict[str, Any]]], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore(Path(tmp))
        source = write_layout(store, layout)
        answer = fork_targets(store, source)
        for n, target in enumerate(answer.targets):
            boundary = target.boundary_sequence
            op = f"op-{n}"
            if not target.available:
                with pytest.raises(BranchwiseError) as caught:
                    fork(store, ForkRequest(source, target.turn_id, boundary or 0, 1), op)
                assert caught.value.code == target.reason
                continue
            assert boundary is not None
            child = fork(
                store, ForkRequest(source, target.turn_id, boundary, 1), op
            ).child_session_id
            parent_then = prefix_projection(store, source, boundary)
            child_state = store.read(child).projection
            assert child_state.model_messages() == parent_then.model_messages()
            assert _child_view(store, child) == [
                (t.turn_id, t.message_id, t.end_reason, t.open_authority) for t in parent_then.turns
            ]
            assert child_state.input_tokens == child_state.output_tokens == 0
        if answer.targets:
            seq = data.draw(st.integers(0, store.read(source).projection.last_seq + 2))
            target = data.draw(st.sampled_from(answer.targets))
            if seq != target.boundary_sequence:
                with pytest.raises(BranchwiseError) as caught:
                    fork(store, ForkRequest(source, target.turn_id, seq, 1), "op-random")
                assert caught.value.code in {"stale_source", "boundary_not_atomic", target.reason}


def test_a_damaged_reservation_is_replaced_not_fatal(store: SessionStore) -> None:
    source = session_with_turns(store, 1)
    boundary = fork_targets(store, source).targets[0].boundary_sequence or 0
    index = OperationIndex(store.root)
    index.directory.mkdir()
    index._path("op-1").write_bytes(b"{torn")
    first = fork(store, ForkRequest(source, "t0", boundary, 1), "op-1")
    assert first.created and fork(
        store, ForkRequest(source, "t0", boundary, 1), "op-1"
    ) == ForkResult(first.child_session_id, False, "op-1")
