"""Attachment bytes: stored once per data root, durable before referenced, shared by branches."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest
from helpers.attachments import pdf_bytes, png_bytes
from helpers.faults import DiskFullAt
from helpers.forking import fork_at

from branchwise.core.conversation.ask_again import edit_request, regenerate_request
from branchwise.core.conversation.attachments import attach_files
from branchwise.core.errors import AttachmentMissing, DiskFull, ReadOnlyDataFolder
from branchwise.core.fork.engine import fork
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.projection.snapshot import capture, restore
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.runtime import TurnRunner
from branchwise.core.store.attachments import BlobStore
from branchwise.core.store.blob_collection import collect_blobs
from branchwise.core.store.store import SessionStore, verify_session
from branchwise.core.store.trash import Trash


def _files(store: SessionStore) -> list[Path]:
    folder = store.root / "attachments"
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def _say(store: SessionStore, session_id: str, text: str, files: tuple[AttachmentRef, ...]) -> str:
    with store.open_writer(session_id) as writer:
        result = asyncio.run(TurnRunner(writer, DemoProvider()).run(text, files))
    assert result.end_reason == "completed", result.error
    return result.turn_id


def _attached(
    tmp_path: Path, store: SessionStore, *blobs: tuple[str, bytes]
) -> tuple[AttachmentRef, ...]:
    paths = []
    for name, data in blobs:
        (tmp_path / name).write_bytes(data)
        paths.append(tmp_path / name)
    return attach_files(store.root, paths)


def test_the_same_file_in_ten_conversations_is_stored_once(
    store: SessionStore, tmp_path: Path
) -> None:
    for n in range(10):
        with store.create(f"c{n}") as writer:
            session_id = writer.session_id
        _say(store, session_id, "look", _attached(tmp_path, store, ("a.png", png_bytes())))
    assert len(_files(store)) == 1
    path = _files(store)[0]
    assert path.parent.parent.name == "sha256" and path.parent.name == path.name[:2]


def test_a_message_refers_to_its_files_by_hash_and_replays_them(
    store: SessionStore, tmp_path: Path
) -> None:
    files = _attached(tmp_path, store, ("a.png", png_bytes()), ("paper.pdf", pdf_bytes(["x", "y"])))
    with store.create("c") as writer:
        session_id = writer.session_id
    _say(store, session_id, "look", files)
    projection = store.read(session_id).projection
    question = projection.messages[0]
    assert question.attachments == files
    assert [ref.type for ref in files] == ["image/png", "application/pdf"]
    assert files[1].pages == 2
    # The projection snapshot keeps them too.
    assert restore(capture(projection)).messages[0].attachments == files
    for ref in files:
        assert BlobStore(store.root).read(ref.sha256) == (tmp_path / ref.name).read_bytes()


def test_fork_edit_and_regenerate_share_the_bytes_without_a_copy(
    store: SessionStore, tmp_path: Path
) -> None:
    files = _attached(tmp_path, store, ("a.png", png_bytes()), ("notes.md", b"# n\n"))
    with store.create("c") as writer:
        session_id = writer.session_id
    first = _say(store, session_id, "look", files)
    second = _say(store, session_id, "more", ())
    blobs_before = _files(store)
    child = fork_at(store, session_id, second).child_session_id
    assert store.read(child).projection.messages[0].attachments == files
    regenerated = fork(store, regenerate_request(store, session_id, first), "op-regen")
    edited = fork(store, edit_request(store, session_id, first, "edited"), "op-edit")
    for branch in (regenerated.child_session_id, edited.child_session_id):
        question = store.read(branch).projection.messages[0]
        assert question.attachments == files
    assert _files(store) == blobs_before  # no new blob, no copy
    # The parent's deletion does not take them from the branches.
    trash = Trash(store)
    trash.trash(session_id)
    trash.purge(session_id)
    assert collect_blobs(store, grace=0).removed == ()
    assert verify_session(store, child)["ok"]


def test_collection_frees_only_what_nothing_refers_to(store: SessionStore, tmp_path: Path) -> None:
    kept = _attached(tmp_path, store, ("kept.png", png_bytes(seed=1)))
    trashed = _attached(tmp_path, store, ("trashed.png", png_bytes(seed=2)))
    orphan = BlobStore(store.root).put(b"stored, then the process died before the commit")
    with store.create("live") as writer:
        live = writer.session_id
    with store.create("binned") as writer:
        binned = writer.session_id
    _say(store, live, "a", kept)
    _say(store, binned, "b", trashed)
    trash = Trash(store)
    trash.trash(binned)
    # A young orphan may belong to a turn about to commit: kept within the grace period.
    assert collect_blobs(store).removed == ()
    result = collect_blobs(store, grace=0)
    assert result.removed == (orphan,)
    assert {p.name for p in _files(store)} == {kept[0].sha256, trashed[0].sha256}
    trash.purge(binned)
    assert collect_blobs(store, grace=0).removed == (trashed[0].sha256,)
    assert [p.name for p in _files(store)] == [kept[0].sha256]


def test_an_unreadable_session_stops_collection(store: SessionStore, tmp_path: Path) -> None:
    BlobStore(store.root).put(b"orphan")
    broken = store.sessions_dir / "0000broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{not json")
    result = collect_blobs(store, grace=0)
    assert result.removed == () and result.unreadable == ("0000broken",)
    assert len(_files(store)) == 1


def test_verify_reports_a_missing_or_damaged_blob(store: SessionStore, tmp_path: Path) -> None:
    files = _attached(tmp_path, store, ("a.png", png_bytes()), ("b.txt", b"text\n"))
    with store.create("c") as writer:
        session_id = writer.session_id
    _say(store, session_id, "look", files)
    report = verify_session(store, session_id)
    assert report["ok"] and report["attachments"] == 2
    blobs = BlobStore(store.root)
    blobs.path(files[0].sha256).unlink()
    damaged = blobs.path(files[1].sha256)
    damaged.chmod(0o600)
    damaged.write_bytes(b"TEXT\n")
    report = verify_session(store, session_id)
    assert not report["ok"]
    found = {
        f["sha256"]: f["problem"] for f in report["findings"] if f["code"] == "attachment_missing"
    }
    assert found == {files[0].sha256: "missing", files[1].sha256: "damaged"}
    with pytest.raises(AttachmentMissing):
        blobs.read(files[1].sha256)
    # The conversation still opens; a turn that would send the missing image ends in error.
    with store.open_writer(session_id) as writer:
        result = asyncio.run(TurnRunner(writer, DemoProvider()).run("again"))
    assert result.end_reason == "error" and result.error is not None
    assert result.error.code == "attachment_missing"


@pytest.mark.parametrize("persistent", [False, True], ids=["once", "disk-stays-full"])
def test_a_full_disk_leaves_nothing_half_written(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch, persistent: bool
) -> None:
    data = png_bytes(seed=9)
    blobs = BlobStore(store.root)
    failures = 0
    for at in range(1, 40):
        faults = DiskFullAt(at, persistent=persistent)
        with faults.armed_in(monkeypatch):
            try:
                sha = blobs.put(data)
            except DiskFull:
                failures += 1
                assert not [p for p in blobs.stored() if p.parent == blobs.incoming]
                # A name whose folder fsync failed may exist: then with every byte, never a part.
                final = blobs.path(_sha(data))
                if final.exists():
                    assert blobs.read(final.name) == data
                    final.unlink()
                continue
        if not faults.fired:
            break
        assert blobs.read(sha) == data
        blobs.path(sha).unlink()
    else:
        raise AssertionError("put never ran out of steps to fail")
    assert failures >= 4  # folders, the temporary file's open, write, fsync, rename


def test_a_read_only_blob_folder_is_a_typed_refusal(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults = DiskFullAt(1, persistent=True, err=errno.EROFS)
    with faults.armed_in(monkeypatch), pytest.raises(ReadOnlyDataFolder):
        BlobStore(store.root).put(b"bytes")
    assert not list(BlobStore(store.root).stored())


def test_a_damaged_blob_is_replaced_when_the_file_is_attached_again(store: SessionStore) -> None:
    blobs = BlobStore(store.root)
    sha = blobs.put(b"original bytes")
    path = blobs.path(sha)
    path.write_bytes(b"original bytez")
    assert blobs.put(b"original bytes") == sha
    assert blobs.read(sha) == b"original bytes"
    assert os.stat(path).st_size == len(b"original bytes")


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()
