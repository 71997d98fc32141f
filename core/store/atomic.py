"""Atomic file replacement: temp file, write, fsync, ``os.replace``, fsync folder.

Used for every small JSON document (manifests, settings, the operations
journal) so a crash leaves either the old or the new file, never a torn one.
A failed write removes its temporary file; :func:`disk_full_as_typed` turns
a lack of space met anywhere in a store operation into the typed
:class:`~branchwise.core.errors.DiskFull`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from branchwise.core.errors import DiskFull


@contextlib.contextmanager
def disk_full_as_typed(message: str, **details: Any) -> Iterator[None]:
    """Raise :class:`DiskFull` (``message``, ``details``) for an ``ENOSPC``/``EDQUOT`` inside.

    Other errors pass through unchanged. The caller cleans up what it built.
    """
    try:
        yield
    except OSError as exc:
        if exc.errno in DiskFull.ERRNOS:
            raise DiskFull(message, **details) from exc
        raise


def fsync_dir(path: Path) -> None:
    """Make a rename or create inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may write less)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def atomic_write_bytes(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` atomically and durably."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        # A full disk must not leave the temporary file behind (nor keep its space).
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
