"""Durability under failing system calls and SIGKILLed writer processes."""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import HELPERS_DIR
from helpers.segmented import scan_log
from helpers.sessions import log_file, log_scan

from branchwise.core.errors import DiskFull, DurabilityError, LeaseHeld, WriterClosed
from branchwise.core.log.writer import OS_FILE_OPS
from branchwise.core.projection import events as ev
from branchwise.core.store.store import SessionStore

WORKER = HELPERS_DIR / "workers.py"


class FailingOps:
    """Real system calls, except the k-th write/fsync fails with an errno.

    This stands in for the kernel failing (a full disk, a dying device), not
    for any of our code.
    """

    def __init__(
        self, fail: str, at: int, err: int, persistent: bool = False, partial: bool = False
    ) -> None:
        self.fail, self.at, self.err = fail, at, err
        self.persistent, self.partial = persistent, partial
        self.calls = {"write": 0, "fsync": 0}

    def _should_fail(self, name: str) -> bool:
        if name != self.fail:
            return False
        self.calls[name] += 1
        n = self.calls[name]
        return n == self.at or (self.persistent and n > self.at)

    def write(self, fd: int, data: bytes | memoryview) -> int:
        if self._should_fail("write"):
            if self.partial and len(data) > 4:
                OS_FILE_OPS.write(fd, bytes(data)[: len(data) // 2])
            raise OSError(self.err, os.strerror(self.err))
        return OS_FILE_OPS.write(fd, data)

    def fsync(self, fd: int) -> None:
        if self._should_fail("fsync"):
            raise OSError(self.err, os.strerror(self.err))
        OS_FILE_OPS.fsync(fd)

    def ftruncate(self, fd: int, length: int) -> None:
        OS_FILE_OPS.ftruncate(fd, length)


def _new_session(root: Path) -> str:
    with SessionStore(root).create("durability") as writer:
        return writer.session_id


def test_failing_fsync_is_never_reported_durable_and_poisons_the_writer(tmp_path: Path) -> None:
    root = tmp_path / "root"
    session_id = _new_session(root)
    ops = FailingOps("fsync", at=2, err=errno.EIO)
    writer = SessionStore(root, file_ops=ops).open_writer(session_id)
    writer.commit([ev.user_message("m1", "kept")])
    with pytest.raises(DurabilityError) as failed:
        writer.commit([ev.user_message("m2", "not durable")])
    assert failed.value.code == "not_durable"
    assert writer.projection.message("m2") is None  # never applied as committed
    with pytest.raises(WriterClosed):
        writer.commit([ev.user_message("m3", "refused")])
    assert ops.calls["fsync"] == 2  # no fsync retry
    writer.close()
    reopened = SessionStore(root).open_writer(session_id)
    assert reopened.projection.message("m1") is not None
    reopened.commit([ev.user_message("m4", "after recovery")])
    reopened.close()
    assert log_scan(reopened.directory).corruption is None


@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("at", [1, 2, 3, 5])
def test_enospc_gives_disk_full_and_no_partial_commit(
    tmp_path: Path, at: int, persistent: bool, partial: bool
) -> None:
    root = tmp_path / "root"
    session_id = _new_session(root)
    ops = FailingOps("write", at=at, err=errno.ENOSPC, persistent=persistent, partial=partial)
    writer = SessionStore(root, file_ops=ops).open_writer(session_id)
    log = log_file(writer.directory)
    reported: list[str] = []
    failures = 0
    for n in range(6):
        try:
            writer.commit([ev.user_message(f"m{n}", f"text {n}")])
            reported.append(f"m{n}")
        except DiskFull as exc:
            failures += 1
            assert exc.code == "disk_full"
            scan = scan_log(log)
            assert scan.torn_tail is None and scan.corruption is None
            assert os.path.getsize(log) == scan.end
    assert failures == (6 - at + 1 if persistent else 1)
    writer.close()
    snapshot = SessionStore(root).read(session_id)
    kept = [m.message_id for m in snapshot.projection.messages]
    assert kept == reported
    assert [e["seq"] for f in snapshot.scan.frames for e in f.events] == list(
        range(1, snapshot.projection.last_seq + 1)
    )


def test_sigkilled_writer_loses_no_reported_commit(tmp_path: Path) -> None:
    root = tmp_path / "root"
    session_id = _new_session(root)
    rng = random.Random(7)
    store = SessionStore(root)
    for _ in range(30):
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(root), session_id, "400"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        durable = 0
        target = rng.randint(1, 300)
        for line in proc.stdout:
            if line.startswith("durable "):
                durable = int(line.split()[1])
                target -= 1
                if target <= 0:
                    break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        writer = store.open_writer(session_id)  # reopens writable despite the kill
        assert writer.projection.last_seq >= durable
        assert log_scan(writer.directory).corruption is None
        writer.close()


def test_second_writer_refused_until_holder_is_killed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    session_id = _new_session(root)
    holder = subprocess.Popen(
        [sys.executable, str(WORKER), str(root), session_id, "hold"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    store = SessionStore(root)
    with pytest.raises(LeaseHeld) as refused:
        store.open_writer(session_id)
    assert refused.value.code == "lease_held"
    assert store.is_being_written(session_id)
    # Readers take no lock and still read.
    assert store.read(session_id).projection.title == "durability"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    holder.stdout.close()
    assert holder.stdin is not None
    holder.stdin.close()
    writer = store.open_writer(session_id)
    writer.close()


def test_same_process_second_writer_is_refused(store: SessionStore) -> None:
    writer = store.create("one")
    with pytest.raises(LeaseHeld):
        store.open_writer(writer.session_id)
    writer.close()
    store.open_writer(writer.session_id).close()


def test_lease_is_flock_on_a_dedicated_never_replaced_file(store: SessionStore) -> None:
    import fcntl

    writer = store.create("lease")
    lock = writer.directory / "writer.lock"
    inode = lock.stat().st_ino
    # A lockf/POSIX lock would vanish when *any* descriptor closes; flock does not.
    other = os.open(lock, os.O_RDONLY)
    os.close(other)
    probe = os.open(lock, os.O_RDONLY)
    with pytest.raises(BlockingIOError):
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(probe)
    writer.close()
    again = store.open_writer(writer.session_id)
    assert lock.stat().st_ino == inode
    again.close()
    assert lock.exists()


def test_reader_sees_whole_frames_while_another_process_appends(tmp_path: Path) -> None:
    root = tmp_path / "root"
    session_id = _new_session(root)
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), str(root), session_id, "600"],
        stdout=subprocess.PIPE,
        text=True,
    )
    store = SessionStore(root)
    seen = 0
    assert proc.stdout is not None
    for line in proc.stdout:
        if not line.startswith("durable"):
            continue
        snapshot = store.read(session_id)
        assert snapshot.scan.corruption is None
        seqs = [e["seq"] for f in snapshot.scan.frames for e in f.events]
        assert seqs == list(range(1, len(seqs) + 1))
        assert len(seqs) >= seen
        seen = len(seqs)
    assert proc.wait() == 0
    proc.stdout.close()
    assert store.read(session_id).projection.last_seq == 601
