"""The Trash in core: move aside whole, restore unchanged, purge, and the refusals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.forking import fork_at
from helpers.sessions import HELPER, session_with_turns, tree_hashes, visible_sessions

from branchwise.core.errors import (
    BranchwiseError,
    LeaseHeld,
    NotTrashed,
    SessionNotFound,
    SessionTrashed,
)
from branchwise.core.fork.targets import fork_targets
from branchwise.core.lineage import lineage
from branchwise.core.store.store import SessionStore, verify_session
from branchwise.core.store.trash import MARKER, PURGE_PREFIX, Trash, parent_state


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "root")


def test_trash_moves_the_session_whole_and_restore_gives_the_same_bytes(
    store: SessionStore,
) -> None:
    session_id = session_with_turns(store, 2, title="Trip")
    before = tree_hashes(store.session_dir(session_id))
    trash = Trash(store)

    entry = trash.trash(session_id)

    assert entry.session_id == session_id and entry.title == "Trip" and entry.kind == "root"
    assert session_id not in visible_sessions(store)
    assert [e.session_id for e in trash.entries()] == [session_id]
    assert trash.entries()[0].trashed_at == entry.trashed_at
    moved = tree_hashes(trash.session_dir(session_id))
    assert {k: v for k, v in moved.items() if k != MARKER} == before

    trash.restore(session_id)

    assert session_id in visible_sessions(store)
    assert tree_hashes(store.session_dir(session_id)) == before
    assert trash.entries() == []
    assert store.read(session_id).projection.turns[-1].turn_id == "t1"


def test_refusals_are_typed_and_change_nothing(store: SessionStore) -> None:
    trash = Trash(store)
    live = session_with_turns(store, 1)
    gone = session_with_turns(store, 1)
    trash.trash(gone)
    snapshot = tree_hashes(store.root)

    cases: list[tuple[type[BranchwiseError], object]] = [
        (SessionNotFound, lambda: trash.trash("nosuchsession")),
        (SessionTrashed, lambda: trash.trash(gone)),
        (NotTrashed, lambda: trash.restore(live)),
        (NotTrashed, lambda: trash.purge(live)),
        (SessionNotFound, lambda: trash.restore("nosuchsession")),
        (SessionNotFound, lambda: trash.purge("nosuchsession")),
    ]
    for kind, call in cases:
        with pytest.raises(kind) as caught:
            call()  # type: ignore[operator]
        assert caught.value.definitive
    assert tree_hashes(store.root) == snapshot


def test_a_session_written_by_another_process_is_refused_with_lease_held(
    store: SessionStore,
) -> None:
    session_id = session_with_turns(store, 1)
    holder = subprocess.Popen(
        [sys.executable, str(HELPER), "hold", str(store.root), session_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(LeaseHeld):
            Trash(store).trash(session_id)
        assert store.exists(session_id) and not Trash(store).contains(session_id)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
        assert holder.stdout is not None
        holder.stdout.close()
    Trash(store).trash(session_id)  # once the writer is gone
    assert not store.exists(session_id)


def test_branches_stay_whole_and_name_their_trashed_then_missing_parent(
    store: SessionStore,
) -> None:
    parent = session_with_turns(store, 2, title="Parent")
    child = fork_at(store, parent, "t0").child_session_id
    child_messages = [m.content for m in store.read(child).projection.messages]
    trash = Trash(store)

    trash.trash(parent)
    assert parent_state(store, parent) == "trashed"
    assert lineage(store, child).broken == {
        "sessionId": parent,
        "code": "trashed",
        "title": "Parent",
    }
    trash.purge(parent)

    assert parent_state(store, parent) == "missing"
    assert lineage(store, child).broken == {"sessionId": parent, "code": "session_not_found"}
    assert verify_session(store, child)["ok"]
    assert [m.content for m in store.read(child).projection.messages] == child_messages
    assert fork_targets(store, child).targets[0].available
    assert not any(p.name.startswith(PURGE_PREFIX) for p in trash.folder.iterdir())


def test_a_trashed_source_cannot_be_forked(store: SessionStore) -> None:
    parent = session_with_turns(store, 1)
    Trash(store).trash(parent)
    with pytest.raises(BranchwiseError) as caught:
        fork_at(store, parent, "t0")
    assert caught.value.code == "source_not_found"


def test_empty_purges_everything_and_sweep_finishes_an_interrupted_purge(
    store: SessionStore,
) -> None:
    trash = Trash(store)
    ids = [session_with_turns(store, 1, title=f"s{n}") for n in range(3)]
    for session_id in ids:
        trash.trash(session_id)
    # A purge a crash cut short: renamed to its dot-name, not yet removed.
    leftover = trash.folder / f"{PURGE_PREFIX}{ids[0]}-dead"
    os.rename(trash.session_dir(ids[0]), leftover)
    assert [e.session_id for e in trash.entries()] == [ids[2], ids[1]]

    assert trash.sweep() == [leftover.name]
    assert sorted(trash.empty()) == sorted(ids[1:])
    assert list(trash.folder.iterdir()) == []
    assert visible_sessions(store) == set()


def test_a_stale_marker_left_by_a_crash_before_the_move_is_harmless(store: SessionStore) -> None:
    session_id = session_with_turns(store, 1)
    (store.session_dir(session_id) / MARKER).write_text('{"format": 1, "trashedAt": 1}')
    assert session_id in visible_sessions(store) and Trash(store).entries() == []
    entry = Trash(store).trash(session_id)
    assert entry.trashed_at > 1  # rewritten by the real move
    Trash(store).restore(session_id)
    assert not (store.session_dir(session_id) / MARKER).exists()


def test_a_damaged_session_can_be_trashed_and_is_listed_untitled(store: SessionStore) -> None:
    session_id = session_with_turns(store, 1)
    (store.session_dir(session_id) / "manifest.json").write_text("{not json")
    entry = Trash(store).trash(session_id)
    assert (entry.title, entry.kind) == ("", None)
    assert Trash(store).entries()[0].to_json()["sessionId"] == session_id
