"""A fork on a full disk: a typed ``disk_full``, nothing left behind, one child on retry.

Every space-taking system call of a fork (the reservation's file, its link,
the child's folder, log, blobs and manifest, each fsync, the publishing
rename) is failed in turn, once and for good (the disk stays full).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.faults import DiskFullAt
from helpers.forking import children_per_operation, make_source, request_for
from helpers.sessions import complete_turn

from branchwise.core.errors import DiskFull
from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import INDEX_DIR, ForkRequest, OperationIndex
from branchwise.core.store.store import SessionStore

MAX_STEPS = 100


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its bytes (the lease file's pid aside)."""
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "writer.lock"
    }


def _request_after_a_blob(store: SessionStore) -> ForkRequest:
    """A fork request at a turn finished after a checkpoint naming one blob (linked along)."""
    source = make_source(store, turns=1)
    data = b"file contents"
    name = hashlib.sha256(data).hexdigest()
    with store.open_writer(source.session_id) as writer:
        blobs = writer.directory / "blobs"
        blobs.mkdir()
        (blobs / name).write_bytes(data)
        writer.commit([{"type": "checkpoint", "checkpointId": "k1", "blobs": [name]}])
        boundary = complete_turn(writer, "t1", "after the checkpoint")
    return ForkRequest(source.session_id, "t1", boundary, 1)


def _sweep(
    store: SessionStore,
    monkeypatch: pytest.MonkeyPatch,
    request_at: Callable[[int], ForkRequest],
    *,
    persistent: bool = False,
    title: str | None = None,
) -> int:
    """Fail each step of the fork in turn; check each failure; return how many steps."""
    source_dir = store.session_dir(request_at(0).source_session_id)
    source_before = _files(source_dir)
    for at in range(1, MAX_STEPS):
        operation, request = f"op-{at}", request_at(at)
        sessions_before = sorted(p.name for p in store.sessions_dir.iterdir())
        index_before = _files(store.root / INDEX_DIR)
        faults = DiskFullAt(at, persistent=persistent)
        with faults.armed_in(monkeypatch):
            try:
                result = fork(store, request, operation, title=title)
            except DiskFull as exc:
                failed: DiskFull | None = exc
            else:
                failed = None
        if not faults.fired:
            assert failed is None and result.created
            return at - 1
        assert failed is not None, f"step {at} ({faults.fired}) was not reported"
        assert failed.code == "disk_full" and failed.http_status == 507
        assert not failed.definitive
        assert failed.to_json()["error"]["operationId"] == operation
        # Nothing stray: no temporary folder, no child, no reservation or temp file.
        assert sorted(p.name for p in store.sessions_dir.iterdir()) == sessions_before, at
        assert _files(store.root / INDEX_DIR) == index_before, (at, faults.fired)
        assert OperationIndex(store.root).lookup(operation) is None
        assert _files(source_dir) == source_before  # the source is never written
        # The space comes back: the same operation makes exactly one child, once.
        first = fork(store, request, operation, title=title)
        again = fork(store, request, operation, title=title)
        assert first.created and not again.created
        assert first.child_session_id == again.child_session_id
        assert children_per_operation(store)[operation] == 1
        child = store.read(first.child_session_id)
        assert child.scan.torn_tail is None and child.scan.corruption is None
        for name in child.projection.checkpoints.get("k1", []):
            assert (store.session_dir(first.child_session_id) / "blobs" / name).is_file()
        assert child.title == (title or "source") == child.manifest.title
    raise AssertionError("the fork never ran out of steps to fail")


@pytest.mark.parametrize("persistent", [False, True], ids=["once", "disk-stays-full"])
def test_a_fork_failing_at_any_step_is_disk_full_and_leaves_nothing(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch, persistent: bool
) -> None:
    request = _request_after_a_blob(store)
    steps = _sweep(store, monkeypatch, lambda at: request, persistent=persistent)
    # fork-index mkdir, reservation open/write/fsync/link, its folder's fsync; the child's
    # mkdir, log open/write/fsync, blobs mkdir/link/fsync, manifest open/write/fsync/
    # replace/fsync, the publishing rename and its fsync
    assert steps >= 20


def test_a_named_child_with_its_title_leaves_nothing_either(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = request_for(store, make_source(store, turns=1), 0)

    def named(at: int) -> ForkRequest:
        return dataclasses.replace(request, child_session_id=f"named{at:04d}")

    assert _sweep(store, monkeypatch, named, title="Named") >= 13
