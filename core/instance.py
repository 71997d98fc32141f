"""One app instance per data root.

The desktop host owns ``fork-operations.json`` and the settings; two app
windows on the same data root would overwrite each other's journal records.
A kernel ``flock`` on ``<root>/app.lock`` (dropped by the kernel when the app
dies, so a crash never blocks the next start) keeps the second one out.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .errors import BranchwiseError


class AppAlreadyRunning(BranchwiseError):
    """Another Branchwise app already uses this data root."""

    code = "app_running"


class InstanceLock:
    """Held for the app's lifetime; construction fails if another app holds it.

    Args:
        root: the data root (must exist).
    """

    def __init__(self, root: Path) -> None:
        path = Path(root) / "app.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
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
