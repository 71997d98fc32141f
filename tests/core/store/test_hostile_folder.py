"""The store against a hostile or damaged data folder (issue 12, items 7, 8, 9).

Symbolic links planted where a session's files belong are never followed out
of the data root; a copied session folder is not a second session with the
same id; a ``manifest.json`` that cannot be read hides no other session.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.forking import fork_at
from helpers.sessions import complete_turn, log_file, session_with_turns

from branchwise.core.errors import (
    BranchwiseError,
    InvalidManifest,
    ManifestMismatch,
    UnreadableManifest,
    UnsafePath,
)
from branchwise.core.lineage import create_child, lineage
from branchwise.core.store.manifest import Manifest
from branchwise.core.store.publish import replace_log
from branchwise.core.store.store import SessionStore, verify_session

SECRET = b"outside the data root: must never be read, emptied or overwritten\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside the data root that planted links point at."""
    target = tmp_path / "outside" / "precious.txt"
    target.parent.mkdir()
    target.write_bytes(SECRET)
    return target


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _digests(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (a session folder holds a log folder) and its digest."""
    return {str(p.relative_to(folder)): _digest(p) for p in folder.rglob("*") if p.is_file()}


def _plant(link: Path, target: Path) -> None:
    if link.is_dir() and not link.is_symlink():
        shutil.rmtree(link)
    elif link.exists() or link.is_symlink():
        link.unlink()
    link.symlink_to(target)


def _refused_unsafe(call: Callable[[], object]) -> UnsafePath:
    with pytest.raises(UnsafePath) as caught:
        call()
    assert caught.value.code == "unsafe_path" and caught.value.definitive
    return caught.value


@pytest.mark.parametrize("name", ["log", "writer.lock", "manifest.json"])
def test_a_planted_file_link_is_refused_by_writers_readers_and_forks(
    store: SessionStore, outside: Path, name: str
) -> None:
    session_id = session_with_turns(store, 1)
    directory = store.session_dir(session_id)
    if name == "log":  # the segment the writer appends to
        name = str(log_file(directory).relative_to(directory))
    _plant(directory / name, outside)
    before = _digest(outside)

    _refused_unsafe(lambda: store.open_writer(session_id))
    if name != "writer.lock":  # readers take no lock, so only a writer meets that one
        _refused_unsafe(lambda: store.read(session_id))
        _refused_unsafe(lambda: fork_at(store, session_id, "t0"))
    _refused_unsafe(lambda: create_child(store, session_id, None, "child"))
    _refused_unsafe(lambda: replace_log(store, session_id, []))
    report = verify_session(store, session_id)
    assert not report["ok"]
    assert [(f["code"], f["file"]) for f in report["findings"]] == [("unsafe_path", name)]

    assert outside.read_bytes() == SECRET and _digest(outside) == before
    assert outside.stat().st_nlink == 1  # not hard-linked into the store either


def test_a_planted_session_folder_link_is_refused(
    store: SessionStore, outside: Path, tmp_path: Path
) -> None:
    session_id = session_with_turns(store, 1)
    elsewhere = tmp_path / "outside" / "session-copy"
    shutil.copytree(store.session_dir(session_id), elsewhere)
    before = _digests(elsewhere)
    link = store.sessions_dir / "linked-0001"
    link.symlink_to(elsewhere, target_is_directory=True)

    _refused_unsafe(lambda: store.open_writer("linked-0001"))
    _refused_unsafe(lambda: store.read("linked-0001"))
    _refused_unsafe(lambda: store.create("new", session_id="linked-0001"))
    _refused_unsafe(lambda: create_child(store, session_id, None, "c", child_id="linked-0001"))
    listed = list(store.iter_manifests())
    assert [m.session_id for m in listed if isinstance(m, Manifest)] == [session_id]
    (error,) = [e for e in listed if isinstance(e, BranchwiseError)]
    assert error.code == "unsafe_path" and error.details["sessionId"] == "linked-0001"
    assert verify_session(store, "linked-0001")["findings"][0]["code"] == "unsafe_path"
    assert _digests(elsewhere) == before


def test_a_fork_never_brings_in_blobs_through_a_link(
    store: SessionStore, outside: Path, tmp_path: Path
) -> None:
    blob = hashlib.sha256(b"snapshot").hexdigest()
    with store.create("with a checkpoint") as writer:
        writer.commit([{"type": "turn/start", "turnId": "t0"}])
        writer.commit([{"type": "checkpoint", "checkpointId": "c0", "blobs": [blob]}])
        writer.commit([{"type": "turn/end", "turnId": "t0", "reason": "completed"}])
        session_id = writer.session_id
    elsewhere = tmp_path / "outside" / "blobs"
    elsewhere.mkdir()
    (elsewhere / blob).write_bytes(SECRET)
    _plant(store.session_dir(session_id) / "blobs", elsewhere)
    _refused_unsafe(lambda: fork_at(store, session_id, "t0"))
    assert os.stat(elsewhere / blob).st_nlink == 1

    (store.session_dir(session_id) / "blobs").unlink()
    (store.session_dir(session_id) / "blobs").mkdir()
    (store.session_dir(session_id) / "blobs" / blob).symlink_to(elsewhere / blob)
    _refused_unsafe(lambda: fork_at(store, session_id, "t0", op="op-2"))
    assert [p.name for p in store.sessions_dir.iterdir()] == [session_id]


def test_a_planted_manifest_temp_file_link_is_never_written_through(
    store: SessionStore, outside: Path
) -> None:
    writer = store.create("rename me")
    try:
        _plant(writer.directory / f".manifest.json.tmp-{os.getpid()}", outside)
        _refused_unsafe(lambda: writer.set_title("renamed"))
    finally:
        writer.close()
    assert outside.read_bytes() == SECRET


def test_a_backup_copy_of_a_session_folder_is_not_a_second_session(store: SessionStore) -> None:
    session_id = session_with_turns(store, 2)
    copy = store.sessions_dir / "backup-0001"
    shutil.copytree(store.session_dir(session_id), copy)

    listed = list(store.iter_manifests())
    assert [m.session_id for m in listed if isinstance(m, Manifest)] == [session_id]
    (error,) = [e for e in listed if isinstance(e, BranchwiseError)]
    assert isinstance(error, ManifestMismatch) and isinstance(error, InvalidManifest)
    assert error.details == {"sessionId": "backup-0001", "manifestSessionId": session_id}
    assert [m.session_id for m in store.list_sessions()] == [session_id]

    before = _digests(copy)
    with pytest.raises(ManifestMismatch):
        store.open_writer("backup-0001")
    with pytest.raises(ManifestMismatch):
        fork_at(store, "backup-0001", "t0")
    with pytest.raises(ManifestMismatch):
        create_child(store, "backup-0001", None, "child of the copy")
    with pytest.raises(ManifestMismatch):
        lineage(store, "backup-0001")
    assert _digests(copy) == before
    report = verify_session(store, "backup-0001")
    assert not report["ok"] and report["findings"][0]["code"] == "manifest_mismatch"
    # The original is untouched by all this and still works.
    with store.open_writer(session_id) as writer:
        complete_turn(writer, "t9")


@pytest.mark.parametrize("damage", ["folder", "unreadable"])
def test_a_manifest_that_cannot_be_read_hides_no_other_session(
    store: SessionStore, damage: str
) -> None:
    good = session_with_turns(store, 1, title="good")
    bad = session_with_turns(store, 1, title="bad")
    manifest = store.session_dir(bad) / "manifest.json"
    manifest.unlink()
    if damage == "folder":
        manifest.mkdir()
    else:
        manifest.write_bytes(b"{}")
        manifest.chmod(0o000)
        if os.access(manifest, os.R_OK):
            pytest.skip("this user reads files whatever their mode (root)")

    listed = list(store.iter_manifests())
    assert [m.session_id for m in listed if isinstance(m, Manifest)] == [good]
    (error,) = [e for e in listed if isinstance(e, BranchwiseError)]
    assert isinstance(error, UnreadableManifest) and error.details["sessionId"] == bad
    assert [m.session_id for m in store.list_sessions()] == [good]
    report = verify_session(store, bad)
    assert not report["ok"] and report["commits"] > 0
    assert [(f["code"], f["file"]) for f in report["findings"]] == [
        ("manifest_unreadable", "manifest.json")
    ]
