"""Reading a log: whole verified frames, a torn tail, or corruption.

A scan reads the file once and splits it into whole verified frames (read
by :func:`~branchwise.core.log.frames.iter_frames`, the one frame reader), an
optional *torn tail* (cut by the writer on open, after saving a copy of the
cut bytes), and an optional *corruption* (never cut; the session becomes
read-only).

Where the line between the two runs (etcd's WAL draws the same one): a write
that never finished leaves a last frame the file ends inside, a header that
is not whole, or sectors the crash left zero-filled, and that is a torn
tail. A last frame whose header is whole, whose length fits the file, which
holds no zero-filled sector and still fails its checksum was written in
full, so it was a durable commit and has since been damaged: that is
corruption, like damage followed by good frames. Cutting it would silently
turn a completed turn into an interrupted one and drop its answer.
A frame over the size limit is corruption too, never cut.
"""

from __future__ import annotations

import contextlib
import gc
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from branchwise.core.errors import CommitTooLarge, CorruptLog, InvalidFrame
from branchwise.core.log.frames import (
    HEADER,
    HEADER_SIZE,
    Frame,
    Incomplete,
    decode_frame,
    find_next_frame,
    iter_frames,
)

SECTOR_SIZE = 512
"""The unit a crash can leave unwritten (zero-filled) inside a frame, as in etcd's WAL."""


@dataclass(frozen=True, slots=True)
class TornTail:
    """Bytes after the last whole frame that do not form a whole frame.

    Attributes:
        offset: where the torn bytes start (the end of the last good frame).
        length: how many bytes were (or would be) cut.
    """

    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Where a scan started after history a projection snapshot already covers.

    Attributes:
        end: the byte offset the covered history ends at (a frame end).
        commit: the last covered commit.
        seq: the last covered seq.
        frame_offset: where the last covered frame starts.
        frame_crc: that frame's payload checksum.
    """

    end: int
    commit: int
    seq: int
    frame_offset: int
    frame_crc: int


@dataclass(slots=True)
class LogScan:
    """The result of reading a log: whole frames and what follows them.

    Attributes:
        frames: every whole, verified frame before any damage (after
            ``resumed`` only, when the scan resumed after a snapshot).
        end: byte offset just past the last good frame.
        torn_tail: incomplete or damaged trailing bytes, if any.
        corruption: a damaged frame followed by good ones, if any.
        resumed: the history before ``frames`` that a projection snapshot
            covers (its bytes checksummed, not decoded), if any.
    """

    frames: list[Frame] = field(default_factory=list)
    end: int = 0
    torn_tail: TornTail | None = None
    corruption: CorruptLog | None = None
    resumed: ResumePoint | None = None

    @property
    def last_seq(self) -> int:
        """Seq of the last event of the last good frame (0 for an empty log)."""
        for frame in reversed(self.frames):
            if frame.events:
                return int(frame.events[-1]["seq"])
        return self.resumed.seq if self.resumed is not None else 0

    @property
    def last_commit(self) -> int:
        """Number of the last good commit (0 for an empty log)."""
        if self.frames:
            return self.frames[-1].commit
        return self.resumed.commit if self.resumed is not None else 0


def scan_bytes(buf: bytes, start: int = 0, first_commit: int = 1, first_seq: int = 1) -> LogScan:
    """Split ``buf`` (from ``start``) into good frames, a torn tail and corruption.

    ``first_commit``/``first_seq`` are what the frame at ``start`` must carry;
    a frame out of sequence counts as damage like a checksum failure. Where
    :func:`iter_frames` stops before the end of ``buf``, :func:`decode_frame`
    diagnoses the frame it refused.
    """
    scan = LogScan(end=start)
    with gc_paused():
        frames = scan.frames = list(
            iter_frames(buf, start=start, first_commit=first_commit, first_seq=first_seq)
        )
        commit, seq = first_commit, first_seq
        if frames:
            last = frames[-1]
            scan.end, commit = last.end, last.commit + 1
            seq = scan.last_seq + 1 if scan.last_seq else first_seq
        if scan.end < len(buf):
            _diagnose(buf, scan.end, commit, seq, scan)
    return scan


def _diagnose(buf: bytes, offset: int, commit: int, seq: int, scan: LogScan) -> None:
    """Classify the frame at ``offset`` that :func:`iter_frames` did not accept."""
    try:
        frame = decode_frame(buf, offset)
        _check_sequence(frame, commit, seq)
    except Incomplete:
        scan.torn_tail = TornTail(offset, len(buf) - offset)
        return
    except CommitTooLarge as exc:
        # A verified header over the one size limit (an older build wrote it): not a
        # torn write, so never cut; every reader stops before it alike.
        scan.corruption = CorruptLog(
            f"{exc.message}; history ends at seq {seq - 1}",
            offset=offset,
            afterSeq=seq - 1,
            reason=exc.code,
        )
        return
    except InvalidFrame as exc:
        if find_next_frame(buf, offset + 1) is not None:
            scan.corruption = CorruptLog(
                f"damaged commit at byte {offset} after seq {seq - 1} "
                f"is followed by good commits: {exc.message}",
                offset=offset,
                afterSeq=seq - 1,
            )
        elif _written_in_full(buf, offset):
            scan.corruption = CorruptLog(
                f"the last commit, at byte {offset} after seq {seq - 1}, was written in full "
                f"and is damaged (not a torn write): {exc.message}",
                offset=offset,
                afterSeq=seq - 1,
                length=len(buf) - offset,
            )
        else:
            scan.torn_tail = TornTail(offset, len(buf) - offset)
        return
    raise AssertionError(f"frame at {offset} is valid but was not accepted")  # pragma: no cover


def _written_in_full(buf: bytes, offset: int) -> bool:
    """Whether the damaged last frame at ``offset`` was completely written (see the module doc).

    The header is trusted when its own checksum holds. A header that fails it
    was still written in full if the bytes after it are exactly the payload
    it announces (by length or by checksum): a bit flipped in a durable
    header, not a header a crash left half-written. A zero-filled sector
    means the write never reached the disk whole, so it is a torn tail.
    """
    _magic, _version, length, crc, hcrc = HEADER.unpack_from(buf, offset)
    payload = memoryview(buf)[offset + HEADER_SIZE :]
    if zlib.crc32(buf[offset : offset + 12]) != hcrc:
        return len(payload) == length or zlib.crc32(payload) == crc
    end = offset + HEADER_SIZE + length
    if end > len(buf):
        return False  # a header refused for its version or length: nothing says it is whole
    # The file holds the whole frame, and any bytes after it were written after it.
    return not _has_zero_sector(buf, offset, end)


def _has_zero_sector(buf: bytes, start: int, end: int) -> bool:
    """Whether a sector-aligned piece of ``buf[start:end]`` is all zeros (etcd's isTornEntry)."""
    piece_start = start
    while piece_start < end:
        piece_end = min(end, (piece_start // SECTOR_SIZE + 1) * SECTOR_SIZE)
        if not any(buf[piece_start:piece_end]):
            return True
        piece_start = piece_end
    return False


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
