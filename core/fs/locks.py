"""The store's locks: a session's single-writer lease and the app's instance lock.

:class:`WriterLease` is a kernel ``flock`` on a session's ``writer.lock``;
:class:`InstanceLock` is one on the data root's ``app.lock``, held while the
app runs so a second app on the same data folder refuses to start.

``flock`` (not ``lockf``/``fcntl`` record locks, which vanish when *any*
descriptor of the file is closed by the process) belongs to one open file
description, so a second ``open`` in the same process conflicts just like
another process does, and the kernel drops the lock when its holder dies: a
crashed writer (or app) never leaves a stale lock. Lock files are never
renamed or deleted, so two processes can never lock two different inodes.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from branchwise.core.errors import AppAlreadyRunning, DiskFull, LeaseHeld, WriterClosed
from branchwise.core.fs.atomic import refusing_read_only
from branchwise.core.fs.safe_open import open_no_follow


class WriterLease:
    """An exclusive, process-lifetime writer lease on one session folder.

    Raises:
        LeaseHeld: another writer holds it.
        ReadOnlyDataFolder: the folder (or its lock file) cannot be written.
        UnsafePath: ``writer.lock`` is a symbolic link (never followed, never emptied).
    """

    def __init__(self, session_dir: Path, session_id: str) -> None:
        self.path = session_dir / "writer.lock"
        with refusing_read_only(session_dir):
            fd = open_no_follow(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise LeaseHeld(
                f"session {session_id} is already open for writing elsewhere",
                sessionId=session_id,
            ) from exc
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError as exc:
            # The pid is only a hint for people; the flock is the lease. A full disk
            # must not stop a writer that may only need to close a turn as an error.
            if exc.errno not in DiskFull.ERRNOS:
                os.close(fd)
                self._fd = -1
                raise

    @property
    def held(self) -> bool:
        """Whether this object still holds the lease."""
        return self._fd >= 0

    def release(self) -> None:
        """Give the lease up (closing the descriptor drops the flock)."""
        if self._fd < 0:
            raise WriterClosed("the lease was already released")
        os.close(self._fd)
        self._fd = -1


def lease_is_held(session_dir: Path) -> bool:
    """Whether some writer currently holds the lease (probe, then let go)."""
    path = session_dir / "writer.lock"
    try:
        fd = open_no_follow(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


class InstanceLock:
    """Held for the app's lifetime; construction fails if another app holds it.

    Args:
        root: the data root (must exist).
    """

    def __init__(self, root: Path) -> None:
        path = Path(root) / "app.lock"
        with refusing_read_only(Path(root)):
            fd = open_no_follow(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise AppAlreadyRunning(
                f"Branchwise is already running with the data folder {root}", root=str(root)
            ) from exc
        self._fd = fd

    def release(self) -> None:
        """Let the next app start (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
