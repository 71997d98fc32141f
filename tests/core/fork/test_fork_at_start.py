"""Fork at the start (issue 13 item 1): an empty prefix, ``seedLength`` 0, boundary 0."""

from __future__ import annotations

from helpers.forking import refused
from helpers.sessions import commits_of, legacy_session, session_with_turns, strip

from branchwise.core.fork.engine import ForkResult, fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.lineage import lineage, tree
from branchwise.core.projection import events as ev
from branchwise.core.store.store import SessionStore


def test_a_fork_at_the_start_inherits_nothing_and_links_to_its_parent(store: SessionStore) -> None:
    source = session_with_turns(store, 2)
    before = commits_of(store, source)
    result = fork(store, ForkRequest(source, None, 0, 1), "op-start")
    assert result == ForkResult(result.child_session_id, True, "op-start")
    child = result.child_session_id
    (own,) = commits_of(store, child)
    assert [strip(e) | {"ts": 0} for e in own] == [
        {"ts": 0, "type": "session/created", "title": "src", "kind": "fork"},
        {
            "ts": 0,
            "type": "session/fork",
            "parentSessionId": source,
            "parentGeneration": 1,
            "turnId": None,
            "boundarySequence": 0,
            "seedLength": 0,
            "operationId": "op-start",
        },
    ]
    manifest = store.manifest(child)
    assert manifest.seed_length == 0 and manifest.kind == "fork"
    assert manifest.parent is not None
    assert (manifest.parent.turn_id, manifest.parent.boundary_sequence) == (None, 0)
    snapshot = store.read(child)
    assert snapshot.projection.turns == [] and snapshot.projection.messages == []
    assert snapshot.title == "src"
    assert commits_of(store, source) == before
    # It can be written like any session.
    with store.open_writer(child) as writer:
        writer.commit([ev.turn_start("new"), ev.user_message("u", "again")])
    assert [entry["sessionId"] for entry in lineage(store, child).to_json()["lineage"]][-1] == (
        source
    )
    listed = tree(store, source).to_json()
    assert child in str(listed)


def test_a_fork_at_the_start_is_idempotent_per_operation(store: SessionStore) -> None:
    source = session_with_turns(store, 1)
    first = fork(store, ForkRequest(source, None, 0, 1), "op-a")
    again = fork(store, ForkRequest(source, None, 0, 1), "op-a")
    assert again == ForkResult(first.child_session_id, False, "op-a")
    refused(
        store, "operation_conflict", lambda: fork(store, ForkRequest(source, "t0", 0, 1), "op-a")
    )
    other = fork(store, ForkRequest(source, None, 0, 1), "op-b")
    assert other.child_session_id != first.child_session_id


def test_a_fork_at_the_start_keeps_the_settings_the_first_turn_ran_with(
    store: SessionStore,
) -> None:
    with store.create("configured") as writer:
        writer.commit([ev.session_config("llama3", "Be brief.", 0.2)])
        writer.commit([ev.turn_start("t0"), ev.user_message("u0", "hi")])
        writer.commit([ev.turn_end("t0", "completed")])
        writer.commit([ev.session_config("other", None, None)])  # after the first turn
        source = writer.session_id
    child = fork(store, ForkRequest(source, None, 0, 1), "op-c").child_session_id
    settings = store.read(child).projection.settings
    assert (settings.model, settings.system, settings.temperature) == ("llama3", "Be brief.", 0.2)


def test_message_only_history_forks_at_the_start(store: SessionStore) -> None:
    source = legacy_session(store)
    child = fork(store, ForkRequest(source, None, 0, 1), "op-l").child_session_id
    assert store.read(child).projection.messages == []


def test_a_fork_at_the_start_refuses_cleanly(store: SessionStore) -> None:
    source = session_with_turns(store, 1)
    refused(
        store,
        "invalid_fork_request",
        lambda: fork(store, ForkRequest(source, None, 3, 1), "op-x"),
    )
    refused(store, "stale_source", lambda: fork(store, ForkRequest(source, None, 0, 2), "op-y"))
    refused(
        store,
        "source_not_found",
        lambda: fork(store, ForkRequest("0000000000-missing", None, 0, 1), "op-z"),
    )
