"""Opening the data root's files without following symbolic links.

Every file of the data root is opened through :func:`open_no_follow`: a
symbolic link planted where a log, lock, manifest or temp file belongs is
refused with ``UnsafePath``, so nothing outside the data root is ever read
through one or emptied and overwritten. Folders are checked with
:func:`refuse_link` before anything is made or read inside them.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from branchwise.core.errors import UnsafePath


def open_no_follow(path: Path, flags: int, mode: int = 0o600) -> int:
    """``os.open`` that never follows a symbolic link as the last part of ``path``.

    Raises:
        UnsafePath: ``path`` is a symbolic link.
        OSError: anything else ``os.open`` raises.
    """
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _unsafe(path) from exc
        raise


def refuse_link(path: Path) -> None:
    """Refuse a folder (or file) of the data root that is a symbolic link; absent is fine.

    Raises:
        UnsafePath: ``path`` is a symbolic link.
    """
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(status.st_mode):
        raise _unsafe(path)


def read_no_follow(path: Path) -> bytes:
    """The whole file at ``path``, refusing a symbolic link (``FileNotFoundError`` if absent)."""
    fd = open_no_follow(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _unsafe(path: Path) -> UnsafePath:
    return UnsafePath(
        f"{path} is a symbolic link; Branchwise does not follow links in its data folder",
        path=str(path),
    )
