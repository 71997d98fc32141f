"""The append-only session log: scanning, torn-tail recovery, durable appends.

A scan reads the file once and splits it into whole verified frames, an
optional *torn tail* (an incomplete or damaged last frame, cut by the writer
on open), and an optional *corruption* (a damaged frame followed by good
ones: never cut, the session becomes read-only). Appends are one ``write``
and one ``fsync`` per commit; a commit is reported durable only after its
fsync returned.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson

from .errors import CorruptLog, DiskFull, DurabilityError, InvalidFrame, WriterClosed
from .frames import (
    FRAME_VERSION,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    Frame,
    Incomplete,
    decode_frame,
    encode_frame,
    find_next_frame,
)


@dataclass(frozen=True, slots=True)
class TornTail:
    """Bytes after the last whole frame that do not form a whole frame.

    Attributes:
        offset: where the torn bytes start (the end of the last good frame).
        length: how many bytes were (or would be) cut.
    """

    offset: int
    length: int


@dataclass(slots=True)
class LogScan:
    """The result of reading a log: whole frames and what follows them.

    Attributes:
        frames: every whole, verified frame before any damage.
        end: byte offset just past the last good frame.
        torn_tail: incomplete or damaged trailing bytes, if any.
        corruption: a damaged frame followed by good ones, if any.
    """

    frames: list[Frame] = field(default_factory=list)
    end: int = 0
    torn_tail: TornTail | None = None
    corruption: CorruptLog | None = None

    @property
    def last_seq(self) -> int:
        """Seq of the last event of the last good frame (0 for an empty log)."""
        for frame in reversed(self.frames):
            if frame.events:
                return int(frame.events[-1]["seq"])
        return 0

    @property
    def last_commit(self) -> int:
        """Number of the last good commit (0 for an empty log)."""
        return self.frames[-1].commit if self.frames else 0


def scan_bytes(buf: bytes, start: int = 0, first_commit: int = 1, first_seq: int = 1) -> LogScan:
    """Split ``buf`` (from ``start``) into good frames, a torn tail and corruption.

    ``first_commit``/``first_seq`` are what the frame at ``start`` must carry;
    a frame out of sequence counts as damage like a checksum failure. The
    common case (a well-formed frame) is decoded inline; anything unusual goes
    through :func:`decode_frame` for a precise diagnosis.
    """
    scan = LogScan(end=start)
    frames = scan.frames
    offset, commit, seq = start, first_commit, first_seq
    size = len(buf)
    unpack, crc32, loads = HEADER.unpack_from, zlib.crc32, orjson.loads
    with gc_paused():
        while offset < size:
            payload_start = offset + HEADER_SIZE
            if payload_start <= size:
                magic, version, length, crc, hcrc = unpack(buf, offset)
                end = payload_start + length
                if (
                    magic == MAGIC
                    and version == FRAME_VERSION
                    and end <= size
                    and crc32(buf[offset : offset + 12]) == hcrc
                ):
                    payload = buf[payload_start:end]
                    if crc32(payload) == crc:
                        try:
                            body = loads(payload)
                        except orjson.JSONDecodeError:
                            body = None
                        is_dict = type(body) is dict
                        events = body.get("events") if is_dict else None
                        if (
                            is_dict
                            and body.get("commit") == commit
                            and type(events) is list
                            and (
                                not events
                                or (
                                    type(events[0]) is dict
                                    and type(events[-1]) is dict
                                    and events[0].get("seq") == seq
                                    and events[-1].get("seq") == seq + len(events) - 1
                                )
                            )
                        ):
                            frames.append(Frame(commit, events, offset, end))
                            offset = scan.end = end
                            commit += 1
                            seq += len(events)
                            continue
            _diagnose(buf, offset, commit, seq, scan)
            break
    return scan


def _diagnose(buf: bytes, offset: int, commit: int, seq: int, scan: LogScan) -> None:
    """Classify the frame at ``offset`` that the fast path could not accept."""
    try:
        frame = decode_frame(buf, offset)
        _check_sequence(frame, commit, seq)
    except Incomplete:
        scan.torn_tail = TornTail(offset, len(buf) - offset)
        return
    except InvalidFrame as exc:
        if find_next_frame(buf, offset + 1) is None:
            scan.torn_tail = TornTail(offset, len(buf) - offset)
        else:
            scan.corruption = CorruptLog(
                f"damaged commit at byte {offset} after seq {seq - 1} "
                f"is followed by good commits: {exc.message}",
                offset=offset,
                afterSeq=seq - 1,
            )
        return
    raise AssertionError(f"frame at {offset} is valid but was not accepted")  # pragma: no cover


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while bulk-decoding.

    Decoding a big log allocates hundreds of thousands of dicts that stay
    alive; each GC pass would rescan all of them, making replay quadratic-ish.
    Nothing decoded here forms reference cycles.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _check_sequence(frame: Frame, commit: int, seq: int) -> None:
    """A frame must carry the next commit number and the next dense run of seqs.

    Checking the first and last seq (and the count) is enough: the checksum
    already vouches for the bytes in between.
    """
    if frame.commit != commit:
        raise InvalidFrame(
            f"commit {frame.commit} where {commit} was expected", offset=frame.offset
        )
    events = frame.events
    if not events:
        return
    first, last = events[0], events[-1]
    if not (
        isinstance(first, dict)
        and isinstance(last, dict)
        and first.get("seq") == seq
        and last.get("seq") == seq + len(events) - 1
    ):
        raise InvalidFrame(f"event seq out of order (expected {seq})", offset=frame.offset)


def scan_log(path: Path) -> LogScan:
    """Read and scan the log at ``path`` (a missing file is an empty log).

    Takes no lock: a reader racing an appending writer sees the frames that
    were whole when it read, and the growing frame as a (not cut) torn tail.
    """
    try:
        buf = path.read_bytes()
    except FileNotFoundError:
        return LogScan()
    return scan_bytes(buf)


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
        scan: a fresh scan of it; a torn tail is cut here, corruption refused.
        ops: the system calls to use (tests inject failures).
    """

    def __init__(self, path: Path, scan: LogScan, ops: FileOps = OS_FILE_OPS) -> None:
        if scan.corruption is not None:
            raise scan.corruption
        self._ops = ops
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        self.cut_tail: TornTail | None = None
        if scan.torn_tail is not None:
            os.ftruncate(self._fd, scan.end)
            os.fsync(self._fd)
            self.cut_tail = scan.torn_tail
        self._end = scan.end
        self._next_commit = scan.last_commit + 1
        self._next_seq = scan.last_seq + 1
        self._failed: str | None = None

    @property
    def next_seq(self) -> int:
        """The seq the next appended event will get."""
        return self._next_seq

    @property
    def last_commit(self) -> int:
        """Number of the last durable commit."""
        return self._next_commit - 1

    def append(self, events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Commit ``events`` atomically and durably; return them with seq and ts.

        Raises:
            DiskFull: no space; nothing of the commit remains in the file.
            DurabilityError: a write or fsync failed otherwise; the writer is
                closed for good (reopen to recover from disk).
            WriterClosed: the writer was closed or failed before.
        """
        if self._failed is not None:
            raise WriterClosed(f"the session writer is closed: {self._failed}")
        ts = time.time()
        stamped = []
        seq = self._next_seq
        for event in events:
            stamped.append({"seq": seq, "ts": ts, **event})
            seq += 1
        data = encode_frame(self._next_commit, stamped)
        self._write_all(data)
        try:
            self._ops.fsync(self._fd)
        except OSError as exc:
            self._failed = f"fsync failed ({exc.strerror or exc})"
            raise DurabilityError(
                f"the commit could not be made durable: {exc.strerror or exc}",
                errno=exc.errno,
            ) from exc
        self._end += len(data)
        self._next_commit += 1
        self._next_seq = seq
        return stamped

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[self._ops.write(self._fd, view) :]
        except OSError as exc:
            self._undo_partial_write(exc)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskFull("the disk is full; the message was not saved") from exc
            self._failed = f"write failed ({exc.strerror or exc})"
            raise DurabilityError(
                f"the commit could not be written: {exc.strerror or exc}", errno=exc.errno
            ) from exc

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
