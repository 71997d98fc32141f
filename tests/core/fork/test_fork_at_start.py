"""Fork at start (issue 13 item 1): an empty prefix, a link with boundary 0 and no turn."""

from __future__ import annotations

from helpers.forking import refused
from helpers.sessions import commits_of, session_with_turns, strip, tree_hashes

from branchwise.core.fork.engine import ForkResult, fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.lineage import lineage, tree
from branchwise.core.projection import events as ev
from branchwise.core.store.store import SessionStore
from branchwise.core.store.trash import Trash


def _at_start(source: str, generation: int = 1) -> ForkRequest:
    return ForkRequest(source, None, 0, generation)


def test_fork_at_start_makes_a_child_with_no_inherited_history(store: SessionStore) -> None:
    source = session_with_turns(store, 2)
    before = tree_hashes(store.session_dir(source))
    result = fork(store, _at_start(source), "op-start")
    assert result == ForkResult(result.child_session_id, True, "op-start")
    assert tree_hashes(store.session_dir(source)) == before

    (own,) = commits_of(store, result.child_session_id)
    created, link = own
    assert strip(created) | {"ts": 0} == {
        "type": "session/created",
        "title": "src",
        "kind": "fork",
        "ts": 0,
    }
    assert link["seq"] == 2
    assert {k: link[k] for k in ("turnId", "boundarySequence", "seedLength")} == {
        "turnId": None,
        "boundarySequence": 0,
        "seedLength": 0,
    }
    manifest = store.manifest(result.child_session_id)
    assert manifest.seed_length == 0 and manifest.kind == "fork"
    assert manifest.parent is not None
    assert (manifest.parent.turn_id, manifest.parent.boundary_sequence) == (None, 0)
    snapshot = store.read(result.child_session_id)
    assert snapshot.projection.messages == [] and snapshot.projection.turns == []


def test_fork_at_start_is_idempotent_per_operation(store: SessionStore) -> None:
    source = session_with_turns(store, 1)
    first = fork(store, _at_start(source), "op-start")
    again = fork(store, _at_start(source), "op-start")
    assert again == ForkResult(first.child_session_id, False, "op-start")
    other = fork(store, _at_start(source), "op-other")
    assert other.child_session_id != first.child_session_id
    refused(
        store,
        "operation_conflict",
        lambda: fork(store, ForkRequest(source, "t0", 99, 1), "op-start"),
    )


def test_fork_at_start_keeps_the_settings_set_before_the_first_turn(
    store: SessionStore,
) -> None:
    with store.create("configured") as writer:
        writer.commit([ev.session_config("m-1", "be brief", 0.5)])
        source = writer.session_id
    with store.open_writer(source) as writer:
        writer.commit([ev.turn_start("t0"), ev.user_message("u0", "hi")])
        writer.commit([ev.turn_end("t0", ev.EndReason.COMPLETED)])
        writer.commit([ev.session_config("m-2", "later", None)])
    child = fork(store, _at_start(source), "op-1").child_session_id
    settings = store.read(child).projection.settings
    assert (settings.model, settings.system, settings.temperature) == ("m-1", "be brief", 0.5)


def test_lineage_and_tree_show_a_fork_at_start(store: SessionStore) -> None:
    source = session_with_turns(store, 1)
    child = fork(store, _at_start(source), "op-1").child_session_id
    assert [m.session_id for m in lineage(store, child).chain] == [child, source]
    top = tree(store, source).to_json()
    entry = next(s for s in top["sessions"] if s["sessionId"] == child)
    assert entry["parent"]["turnId"] is None and entry["parent"]["boundarySequence"] == 0


def test_fork_at_start_refuses_what_it_cannot_fork(store: SessionStore) -> None:
    source = session_with_turns(store, 1)
    refused(
        store, "invalid_fork_request", lambda: fork(store, ForkRequest(source, None, 3, 1), "op")
    )
    refused(store, "stale_source", lambda: fork(store, _at_start(source, 7), "op"))
    refused(
        store,
        "source_not_found",
        lambda: fork(store, _at_start("01a23f70-0159-7000-9ed8-11f35fbca8ee"), "op"),
    )
    Trash(store).trash(source)
    refused(store, "source_not_found", lambda: fork(store, _at_start(source), "op"))
