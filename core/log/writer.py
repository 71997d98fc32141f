"""Durable appends to a session log, and the system-call seam tests inject faults through.

Appends are one ``write`` and one ``fsync`` per commit; a commit is reported
durable only after its fsync returned. A failed write is undone (no partial
commit stays visible); a failed fsync closes the writer for good, except for
lack of space (below).

A full disk (``ENOSPC``/``EDQUOT``) is :class:`~branchwise.core.errors.DiskFull`
wherever it strikes, and the writer stays usable when the failed commit could
be taken back: after a failed write the file is cut back to the last durable
commit; after a failed fsync it is cut back too and fsynced again. Retrying an
fsync is unsafe only for data one means to keep (Linux may have dropped the
dirty pages and reports the error once); here the unsynced bytes are thrown
away, and everything before them was already made durable by earlier fsyncs,
so a successful fsync of the cut leaves exactly the durable commits. If the
cut itself fails the writer is closed, as for any other failed fsync.

Opening a log with a torn tail cuts it, but never loses a byte: the cut bytes
are first saved, fsynced, beside the log as ``events.log.cut-<UTC time>-at<offset>``.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from branchwise.core.errors import DiskFull, DurabilityError, WriterClosed
from branchwise.core.fs.atomic import fsync_dir, write_all
from branchwise.core.fs.safe_open import open_no_follow
from branchwise.core.log.frames import HEADER, encode_frame
from branchwise.core.log.scan import LogScan, TornTail

CUT_SUFFIX = ".cut-"
"""``events.log.cut-…``: bytes a repair removed from ``events.log``, kept beside it."""


class FileOps(Protocol):
    """The three system calls an append uses; a seam for fault-injection tests."""

    def write(self, fd: int, data: bytes | memoryview) -> int: ...  # noqa: D102
    def fsync(self, fd: int) -> None: ...  # noqa: D102
    def ftruncate(self, fd: int, length: int) -> None: ...  # noqa: D102


class _OsFileOps:
    write = staticmethod(os.write)
    fsync = staticmethod(os.fsync)
    ftruncate = staticmethod(os.ftruncate)


OS_FILE_OPS: FileOps = _OsFileOps()


class LogWriter:
    """Appends commits to one log. Only the holder of the writer lease makes one.

    Args:
        path: the ``events.log`` file.
        scan: a fresh scan of it; a torn tail is cut here (after a copy of
            it is saved), corruption refused.
        ops: the system calls to use (tests inject failures).
        untimed: the event types stamped without ``ts``; the log does not
            know event kinds, the projection names them
            (:data:`~branchwise.core.projection.events.UNTIMED_EVENTS`).
        after: the last commit and seq before this file (a new segment of a
            segmented log starts empty, after the previous segment's).

    Attributes:
        cut_tail: the torn tail cut on open, if any.
        cut_copy: the file holding exactly the bytes that were cut.
        last_frame: ``(offset, end, payload CRC)`` of the last appended frame.

    Raises:
        CorruptLog: ``scan`` found corruption.
        UnsafePath: ``path`` is a symbolic link.
    """

    def __init__(
        self,
        path: Path,
        scan: LogScan,
        ops: FileOps = OS_FILE_OPS,
        *,
        untimed: frozenset[str],
        after: tuple[int, int] | None = None,
    ) -> None:
        if scan.corruption is not None:
            raise scan.corruption
        self._ops = ops
        self._untimed = untimed
        self._fd = open_no_follow(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        self.cut_tail: TornTail | None = None
        self.cut_copy: Path | None = None
        if scan.torn_tail is not None:
            try:
                self.cut_copy = save_cut_bytes(path, self._fd, scan.end)
                os.ftruncate(self._fd, scan.end)
                os.fsync(self._fd)
            except BaseException:
                os.close(self._fd)
                raise
            self.cut_tail = scan.torn_tail
        self._end = scan.end
        last_commit, last_seq = after if after is not None else (scan.last_commit, scan.last_seq)
        self._next_commit = last_commit + 1
        self._next_seq = last_seq + 1
        self._failed: str | None = None
        self.last_frame: tuple[int, int, int] | None = None

    @property
    def last_commit(self) -> int:
        """Number of the last durable commit."""
        return self._next_commit - 1

    def append(self, events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Commit ``events`` atomically and durably; return them with seq and ts.

        Raises:
            CommitTooLarge: the commit is over the frame size limit; nothing is written.
            DiskFull: no space; nothing of the commit remains in the file, and
                earlier commits are kept (if the commit could not be taken back,
                ``writerClosed`` is true and the writer is closed).
            DurabilityError: a write or fsync failed otherwise; the writer is
                closed for good (reopen to recover from disk).
            WriterClosed: the writer was closed or failed before.
        """
        if self._failed is not None:
            raise WriterClosed(f"the session writer is closed: {self._failed}")
        ts = time.time()
        stamped = []
        seq = self._next_seq
        untimed = self._untimed
        for event in events:
            if event["type"] in untimed:
                stamped.append({"seq": seq, **event})
            else:
                stamped.append({"seq": seq, "ts": ts, **event})
            seq += 1
        data = encode_frame(self._next_commit, stamped)  # refuses an oversized commit first
        self._write_all(data)
        try:
            self._ops.fsync(self._fd)
        except OSError as exc:
            if exc.errno in DiskFull.ERRNOS:
                raise self._take_back_unsynced(exc) from exc
            self._failed = f"fsync failed ({exc.strerror or exc})"
            raise DurabilityError(
                f"the commit could not be made durable: {exc.strerror or exc}",
                errno=exc.errno,
            ) from exc
        self.last_frame = (self._end, self._end + len(data), int(HEADER.unpack_from(data)[3]))
        self._end += len(data)
        self._next_commit += 1
        self._next_seq = seq
        return stamped

    @property
    def last_seq(self) -> int:
        """Seq of the last durable event."""
        return self._next_seq - 1

    @property
    def size(self) -> int:
        """Bytes of durable commits in this file."""
        return self._end

    def fileno(self) -> int:
        """The open file (to ``fstat`` its link count)."""
        return self._fd

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[self._ops.write(self._fd, view) :]
        except OSError as exc:
            self._undo_partial_write(exc)
            if exc.errno in DiskFull.ERRNOS:
                raise _disk_full(self._failed is not None) from exc
            self._failed = f"write failed ({exc.strerror or exc})"
            raise DurabilityError(
                f"the commit could not be written: {exc.strerror or exc}", errno=exc.errno
            ) from exc

    def _take_back_unsynced(self, cause: OSError) -> DiskFull:
        """After an fsync failed for lack of space: cut the commit off and make the cut durable.

        Returns the error to raise; the writer stays usable when the cut succeeded.
        """
        try:
            self._ops.ftruncate(self._fd, self._end)
            self._ops.fsync(self._fd)
        except OSError:
            self._failed = f"fsync failed and could not be undone ({cause.strerror or cause})"
            return _disk_full(True)
        return _disk_full(False)

    def _undo_partial_write(self, cause: OSError) -> None:
        """Cut bytes a failed write may have left, so no partial commit stays."""
        try:
            self._ops.ftruncate(self._fd, self._end)
        except OSError:
            # Readers still ignore the partial frame; a reopen cuts it as a torn tail.
            self._failed = f"write failed and could not be undone ({cause.strerror or cause})"

    def close(self) -> None:
        """Close the file; later appends raise ``WriterClosed``."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._failed is None:
            self._failed = "closed"


def save_cut_bytes(path: Path, fd: int, start: int) -> Path:
    """Save the bytes of ``fd`` (the log at ``path``) from ``start`` on, durably, before a cut.

    The copy is named ``<log>.cut-<UTC time>-at<start>`` (a counter is added if
    that name is taken), so any number of repairs keep their copies side by side.

    Returns:
        The path of the copy.
    """
    size = os.fstat(fd).st_size
    chunks = []
    offset = start
    while offset < size:
        chunk = os.pread(fd, size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    for attempt in itertools.count():
        extra = f"-{attempt}" if attempt else ""
        copy = path.with_name(f"{path.name}{CUT_SUFFIX}{stamp}-at{start}{extra}")
        try:
            out = open_no_follow(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        break
    try:
        write_all(out, b"".join(chunks))
        os.fsync(out)
    finally:
        os.close(out)
    fsync_dir(path.parent)
    return copy


def _disk_full(writer_closed: bool) -> DiskFull:
    """The refusal of one commit for lack of space (earlier commits are kept)."""
    if writer_closed:
        return DiskFull(
            "the disk is full: the last change could not be saved, and the session "
            "must be reopened to go on; what was saved before it is kept",
            writerClosed=True,
        )
    return DiskFull(
        "the disk is full: the last change could not be saved; what was saved before it is kept"
    )
