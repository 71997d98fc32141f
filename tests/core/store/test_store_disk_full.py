"""``session new`` and renames on a full disk: typed ``disk_full``, nothing half-built."""

from __future__ import annotations

import errno
import os

import pytest
from helpers.faults import DiskFullAt

from branchwise.core.errors import DiskFull, LeaseHeld
from branchwise.core.projection import events as ev
from branchwise.core.store.store import SessionStore

MAX_STEPS = 60


@pytest.mark.parametrize("persistent", [False, True], ids=["once", "disk-stays-full"])
def test_creating_a_session_on_a_full_disk_leaves_no_folder(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch, persistent: bool
) -> None:
    failures = 0
    for at in range(1, MAX_STEPS):
        before = sorted(p.name for p in store.sessions_dir.iterdir())
        faults = DiskFullAt(at, persistent=persistent)
        with faults.armed_in(monkeypatch):
            try:
                writer = SessionStore(store.root, file_ops=faults).create("new", f"made{at:04d}")
            except DiskFull as exc:
                failed: DiskFull | None = exc
            else:
                failed = None
                writer.close()
        if failed is None:
            if not faults.fired:
                break
            continue  # a failure nothing depended on (the lease file's pid hint)
        failures += 1
        assert failed.code == "disk_full" and failed.details["sessionId"] == f"made{at:04d}"
        assert "nothing was saved" in failed.message
        # No half-built folder, nothing published, and the id is still free.
        assert sorted(p.name for p in store.sessions_dir.iterdir()) == before, faults.fired
        with store.create("new", f"made{at:04d}") as writer:  # the space came back
            assert writer.projection.title == "new"
        assert store.read(f"made{at:04d}").manifest.title == "new"
    else:
        raise AssertionError("create never ran out of steps to fail")
    # folder, manifest (open, write, fsync, replace, folder fsync), lease file, log (open,
    # write, fsync), publishing rename and its fsync
    assert failures >= 11


def test_the_created_writer_is_the_published_one(store: SessionStore) -> None:
    with store.create("s") as writer:
        writer.commit([ev.user_message("m1", "hello")])
        with pytest.raises(LeaseHeld):
            store.open_writer(writer.session_id)
    assert store.read(writer.session_id).projection.message("m1") is not None
    assert not [p for p in store.sessions_dir.iterdir() if p.name.startswith(".")]


def test_a_title_whose_manifest_cannot_be_written_is_taken_from_the_log(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    with store.create("old") as writer:
        session_id = writer.session_id
    faults = DiskFullAt(3)  # the title commit's write and fsync fit; the manifest's file not
    writer = SessionStore(store.root, file_ops=faults).open_writer(session_id)
    with faults.armed_in(monkeypatch), pytest.raises(DiskFull) as failed:
        writer.set_title("new")
    assert faults.fired == ["open"]
    assert failed.value.details["titleSaved"] is True
    assert writer.manifest.title == "old"  # as on disk
    assert store.manifest(session_id).title == "old"
    assert store.read(session_id).title == "new"  # readers take the log's
    assert not [p.name for p in writer.directory.iterdir() if ".tmp" in p.name]
    writer.close()
    with store.open_writer(session_id) as writer:  # the next writer catches the manifest up
        assert writer.manifest.title == "new"
    assert store.manifest(session_id).title == "new"


def test_a_title_whose_commit_does_not_fit_changes_nothing(store: SessionStore) -> None:
    faults = DiskFullAt(1)
    with store.create("old") as writer:
        session_id = writer.session_id
    writer = SessionStore(store.root, file_ops=faults).open_writer(session_id)
    faults.armed = True
    with pytest.raises(DiskFull) as failed:
        writer.set_title("new")
    faults.armed = False
    assert failed.value.details["titleSaved"] is False
    writer.close()
    assert store.read(session_id).title == store.manifest(session_id).title == "old"


def test_opening_a_writer_that_cannot_close_the_open_turn_releases_the_lease(
    store: SessionStore,
) -> None:
    with store.create("s") as writer:
        session_id = writer.session_id
        writer.commit([ev.turn_start("t1"), ev.user_message("u1", "q")])
        # A crash: the writer goes away with the turn open.
        writer._log.close()
        writer._lease.release()
    faults = DiskFullAt(1, persistent=True)
    faults.armed = True
    with pytest.raises(DiskFull):
        SessionStore(store.root, file_ops=faults).open_writer(session_id)
    assert not store.is_being_written(session_id)
    with store.open_writer(session_id) as writer:  # space back: closed as interrupted
        assert writer.projection.turns[0].end_reason == "interrupted"


def test_a_lease_pid_hint_that_does_not_fit_does_not_stop_the_writer(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    with store.create("s") as writer:
        session_id = writer.session_id

    def no_space(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(os, "write", no_space)
        writer = store.open_writer(session_id)
    assert store.is_being_written(session_id)
    writer.close()
