"""Atomic file replacement (temp file, write, fsync, ``os.replace``, fsync folder), link-safe.

Used for every small JSON document (manifests, settings, the operations
journal) so a crash leaves either the old or the new file, never a torn one.

Every file of the data root is opened without following links
(:mod:`~branchwise.core.fs.safe_open`).

A failed write removes its temporary file; :func:`disk_full_as_typed` turns
a lack of space met anywhere in a store operation into the typed
:class:`~branchwise.core.errors.DiskFull`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from branchwise.core.errors import DiskFull, ReadOnlyDataFolder
from branchwise.core.fs.safe_open import open_no_follow


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


_READ_ONLY_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS)


@contextlib.contextmanager
def refusing_read_only(folder: Path) -> Iterator[None]:
    """Turn "permission denied" or "read-only file system" met while writing into a typed refusal.

    Raises:
        ReadOnlyDataFolder: a write inside the block was refused by the system.
    """
    try:
        yield
    except OSError as exc:
        if exc.errno not in _READ_ONLY_ERRNOS:
            raise
        raise ReadOnlyDataFolder(
            f"cannot write in {folder}: {exc.strerror or exc}", path=str(folder)
        ) from exc


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


def write_durably(path: Path, data: bytes | bytearray, *, exclusive: bool = True) -> None:
    """Create ``path`` (never through a link) with ``data``: one sequential write, then fsync.

    ``exclusive`` refuses an existing file (``FileExistsError``); otherwise it
    is truncated. The caller fsyncs the folder when the name must be durable.
    """
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = open_no_follow(path, flags, 0o600)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_new(path: Path, data: bytes | bytearray) -> None:
    """Create ``path`` (never through a link) with ``data``, without an fsync.

    Only for a file nothing durable depends on until its writer makes a whole
    batch durable at once (:func:`sync_filesystem`), before the publishing
    rename: one sync for many files instead of one fsync each.
    """
    fd = open_no_follow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)


def _libc_syncfs() -> Any:
    try:
        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int
    return function


_SYNCFS = _libc_syncfs()


def sync_filesystem(folder: Path) -> None:
    """Make everything written on ``folder``'s file system durable: data, files and folders.

    Linux's ``syncfs`` (one journal commit for a whole batch of new files,
    where an fsync each would wait for one commit per file); elsewhere
    ``os.sync``, which syncs every file system. Either returns only when the
    data is on the disk.

    Raises:
        OSError: the file system reported a write error (``ENOSPC`` included).
    """
    if _SYNCFS is None:
        os.sync()
        return
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if _SYNCFS(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), str(folder))
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` atomically and durably."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = open_no_follow(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
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


def copy_durably(src: Path, dst: Path, length: int | None = None) -> None:
    """Copy the first ``length`` bytes of ``src`` (all when ``None``) to a new ``dst``, fsynced.

    Uses ``copy_file_range`` (a reflink or an in-kernel copy where the file
    system offers one), else plain reads and writes. Neither path follows a
    symbolic link. The caller fsyncs the folder when the name must be durable.

    Raises:
        FileExistsError: ``dst`` exists.
    """
    source = open_no_follow(src, os.O_RDONLY)
    try:
        total = os.fstat(source).st_size if length is None else length
        target = open_no_follow(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            offset = 0
            while offset < total:
                try:
                    copied = os.copy_file_range(source, target, total - offset, offset, offset)
                except OSError:
                    copied = 0
                if copied <= 0:
                    chunk = os.pread(source, min(total - offset, 1 << 20), offset)
                    if not chunk:
                        break
                    os.pwrite(target, chunk, offset)
                    copied = len(chunk)
                offset += copied
            os.fsync(target)
        finally:
            os.close(target)
    finally:
        os.close(source)


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (this one does: a thread of it may be writing)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, owned by someone else
    return True


def write_cache_file(path: Path, data: bytes | bytearray) -> bool:
    """Replace a rebuildable cache file (a projection snapshot, a turn table); ``False`` if not.

    Written under a temporary name carrying the writer's pid, then renamed
    over ``path``: readers see the old file or the new one, never a part.
    No fsync: a cache lost to a power cut is rebuilt, and it is checked
    before it is trusted. Temporary files of killed writers are removed
    first; a live process's (a writing thread that outlived its lease) are
    left alone.
    """
    prefix = f".{path.name}.tmp-"
    with contextlib.suppress(OSError):
        for name in os.listdir(path.parent):
            pid = name[len(prefix) :].split("-", 1)[0] if name.startswith(prefix) else ""
            if pid.isdigit() and not process_alive(int(pid)):
                with contextlib.suppress(OSError):
                    os.unlink(path.parent / name)
    tmp = path.with_name(f"{prefix}{os.getpid()}-{threading.get_ident()}")
    try:
        fd = open_no_follow(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False
    return True
