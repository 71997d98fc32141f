"""A session's log as the files that hold it: one ``events.log``, or seeds and segments.

Format 1 keeps the whole log in ``events.log``. Format 2 (docs/storage.md, "Segments")
keeps it as immutable segment files ``<log>/<C>-<S>.seg`` (``C`` the first
commit, ``S`` the first seq, 12 digits each), after the *seeds* the manifest
lists: hard links to an ancestor's segments, each read only up to its
``end``. Either way the log is a sequence of :class:`Piece`\\ s, and since a
seed ends on a frame end and frames are self-delimiting, the pieces laid end
to end are one valid frame stream: the *virtual log*. Every reader (replay,
fork targets, search, the desktop's preview) reads that stream, so the frame
rules stay in one place (:mod:`~branchwise.core.log.frames`), and offsets into
it are *virtual* offsets, mapped back to a file and its own offset by
:meth:`SessionLog.locate` whenever damage is named.

On top of the frame checks of :func:`~branchwise.core.log.scan.scan_bytes`,
reading a segmented log checks continuity (invariant 4): a seed must be as
long as its ``end`` and end exactly on a frame of commit ``endCommit`` whose
payload checksum is ``lastCrc``; every piece must start with the commit and
seq its name or entry says. Damage anywhere but at the end of the last own
segment is corruption (never cut); only the last own segment has a torn tail.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, Self, TypeVar

from branchwise.core.errors import BranchwiseError, CorruptLog
from branchwise.core.fs.safe_open import open_no_follow, refuse_link
from branchwise.core.log import scan as log_scan
from branchwise.core.log.frames import HEADER, Frame, Incomplete, decode_frame
from branchwise.core.log.scan import LogScan, ResumePoint, gc_paused
from branchwise.core.log.sidecars import INDEX_SUFFIX, RECORD_SIZE, IndexRecord, index_header

LEGACY_LOG = "events.log"
"""The one log file of a format-1 session."""
SEGMENT_SUFFIX = ".seg"
ROLL_BYTES = 16 * 1024 * 1024
"""The writer starts a new segment once the active one reaches this size (16 MiB)."""
ROLL_LINKS = 512
"""The writer starts a new segment once the active one has this many links (NTFS allows 1,023)."""
_SEGMENT = re.compile(r"([0-9]{12})-([0-9]{12})\.seg")


def segment_name(first_commit: int, first_seq: int) -> str:
    """The file name of an own segment starting at this commit and seq."""
    return f"{first_commit:012d}-{first_seq:012d}{SEGMENT_SUFFIX}"


def parse_segment_name(name: str) -> tuple[int, int] | None:
    """``(first commit, first seq)`` of an own segment's file name, ``None`` for other files."""
    match = _SEGMENT.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


class SeedBound(Protocol):
    """An inherited segment as the log reads it: where it starts, and the verified end.

    The store's manifest entries are these; the log only reads them.
    """

    @property
    def file(self) -> str: ...
    @property
    def first_commit(self) -> int: ...
    @property
    def first_seq(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def end_commit(self) -> int: ...
    @property
    def last_crc(self) -> int: ...


class LogLayout(Protocol):
    """Which files hold a session's log: what the log needs of the store's manifest.

    The log lists, reads and checks files; which format a session has, where
    its own segments are and which seeds it inherited is the manifest's to
    say, so the store hands its manifest over as this and the log never reads
    one itself.
    """

    @property
    def segmented(self) -> bool:
        """Format 2 (seeds and segments) rather than one ``events.log``."""
        ...

    @property
    def log_dir(self) -> str:
        """The folder of the session's own segments."""
        ...

    @property
    def seed(self) -> Sequence[SeedBound]:
        """The inherited segments, in order."""
        ...

    @property
    def seed_length(self) -> int:
        """The last seq the seeds hold (0 for a session with none)."""
        ...

    def reread(self, directory: Path) -> Self | None:
        """The layout on disk now, ``None`` if it cannot be read.

        Asked when a format-1 log vanished under a reader: a migration that
        finished meanwhile replaced it with segments.
        """
        ...


Layout = TypeVar("Layout", bound=LogLayout)


@dataclass(frozen=True, slots=True)
class Piece:
    """One file of a session's log, in reading order.

    Attributes:
        path: the file.
        name: its name relative to the session folder (reports name it).
        first_commit: the commit its first frame must carry.
        first_seq: the seq its first event must carry.
        seed: the layout's entry when the piece is a seed (read up to ``seed.end``).
    """

    path: Path
    name: str
    first_commit: int
    first_seq: int
    seed: SeedBound | None = None

    @property
    def own(self) -> bool:
        """Whether the session wrote this piece (not inherited)."""
        return self.seed is None


def log_pieces(directory: Path, manifest: LogLayout) -> list[Piece]:
    """The files of a session's log in reading order (seeds, then own segments by name).

    Files in the log folder that are not segments (sidecars, temporary
    files) are not pieces.
    """
    if not manifest.segmented:
        return [Piece(directory / LEGACY_LOG, LEGACY_LOG, 1, 1)]
    log_dir = directory / manifest.log_dir
    pieces = [
        Piece(
            log_dir / seed.file,
            f"{manifest.log_dir}/{seed.file}",
            seed.first_commit,
            seed.first_seq,
            seed,
        )
        for seed in manifest.seed
    ]
    try:
        names = sorted(os.listdir(log_dir))
    except FileNotFoundError:
        names = []
    for name in names:
        first = parse_segment_name(name)
        if first is not None:
            pieces.append(Piece(log_dir / name, f"{manifest.log_dir}/{name}", *first))
    return pieces


def read_piece(piece: Piece, start: int = 0) -> bytes:
    """The bytes of one piece from ``start`` (a seed only up to its end).

    A seed shorter than its ``end`` is corruption: the manifest vouches for
    bytes that are not there.

    Raises:
        UnsafePath: the file is a symbolic link.
        CorruptLog: a seed is missing or short.
    """
    limit = piece.seed.end if piece.seed is not None else None
    try:
        fd = open_no_follow(piece.path, os.O_RDONLY)
    except FileNotFoundError:
        if piece.seed is None and piece.name == LEGACY_LOG:
            return b""  # a format-1 session before its first commit
        raise _missing(piece) from None
    try:
        size = os.fstat(fd).st_size
        stop = size if limit is None else limit
        if size < stop:
            raise CorruptLog(
                f"{piece.name} holds {size} bytes, short of the {stop} its seed entry vouches for",
                file=piece.name,
                offset=size,
                afterSeq=piece.first_seq - 1,
            )
        chunks = []
        offset = start
        while offset < stop:
            chunk = os.pread(fd, stop - offset, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _missing(piece: Piece) -> CorruptLog:
    return CorruptLog(
        f"{piece.name} is missing", file=piece.name, offset=0, afterSeq=piece.first_seq - 1
    )


@dataclass(slots=True)
class SessionLog(Generic[Layout]):
    """A session's log as read: its pieces, their bytes laid end to end, and the scan.

    Attributes:
        manifest: the layout (the store's manifest) the pieces were listed from.
        pieces: the files, in reading order.
        starts: the virtual offset where each piece starts.
        data: the virtual log (every piece's bytes, in order).
        scan: frames (virtual offsets), torn tail, corruption (named by file).
    """

    manifest: Layout
    pieces: list[Piece]
    starts: list[int]
    data: bytes
    scan: LogScan = field(default_factory=LogScan)

    def locate(self, virtual: int) -> tuple[Piece, int]:
        """The piece holding a virtual offset, and the offset inside its file.

        An offset on a boundary belongs to the piece that starts there; the
        end of the log belongs to the last piece.
        """
        index = max(0, bisect.bisect_right(self.starts, virtual) - 1)
        while index > 0 and index >= len(self.pieces):
            index -= 1
        piece = self.pieces[index]
        return piece, virtual - self.starts[index]

    @property
    def active(self) -> Piece | None:
        """The last own piece, the one a writer appends to (``None`` if there is none)."""
        if self.pieces and self.pieces[-1].own:
            return self.pieces[-1]
        return None

    @property
    def active_start(self) -> int:
        """Virtual offset where the last piece starts."""
        return self.starts[-1] if self.starts else 0


def read_session_log(directory: Path, manifest: Layout) -> SessionLog[Layout]:
    """Read every piece of a session's log (no lock; whole files as they are now).

    A format-1 manifest whose ``events.log`` vanished because a migration
    finished meanwhile is read again under the new manifest.

    Raises:
        UnsafePath: a log file is a symbolic link.
        CorruptLog: a seed is missing or shorter than its entry says.
    """
    manifest, pieces = _current_pieces(directory, manifest)
    starts, chunks, total = [], [], 0
    for piece in pieces:
        chunk = read_piece(piece)
        starts.append(total)
        chunks.append(chunk)
        total += len(chunk)
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    return SessionLog(manifest, pieces, starts, data)


def _current_pieces(directory: Path, manifest: Layout) -> tuple[Layout, list[Piece]]:
    """The pieces to read, under the newer layout if a migration just replaced the log."""
    for _ in range(3):
        pieces = log_pieces(directory, manifest)
        if (
            not manifest.segmented
            and not os.path.lexists(pieces[0].path)
            and os.path.isdir(directory / "log")
        ):
            newer = manifest.reread(directory)
            if newer is None:
                break  # the caller's manifest is all there is to go by
            if newer.segmented:
                manifest = newer
                continue
        break
    return manifest, pieces


def scan_session_log(
    directory: Path,
    manifest: Layout,
    resume_from: Callable[[SessionLog[Layout]], ResumePoint | None] | None = None,
) -> SessionLog[Layout]:
    """Read and scan a session's log: frames, torn tail, corruption and continuity.

    A damaged seed (missing, short, not ending on its ``lastCrc``) does not
    raise: like any corruption it is reported in ``scan.corruption`` and
    history ends before it.

    ``resume_from`` is asked, once the bytes are read, whether a projection
    snapshot vouches for a prefix of them (:mod:`~branchwise.core.projection.snapshot_cache`
    checks the prefix's checksum and layout); frames are then decoded and
    checked only after it, and ``scan.resumed`` says where that was.
    """
    try:
        log = read_session_log(directory, manifest)
    except CorruptLog as exc:
        damaged: SessionLog[Layout] = SessionLog(manifest, [], [], b"")
        damaged.scan.corruption = exc
        return damaged
    return scan_read_log(log, resume_from)


def scan_read_log(
    log: SessionLog[Layout],
    resume_from: Callable[[SessionLog[Layout]], ResumePoint | None] | None = None,
) -> SessionLog[Layout]:
    """Scan a log already read (``log.scan`` is replaced; see :func:`scan_session_log`)."""
    point = resume_from(log) if resume_from is not None else None
    with gc_paused():
        if point is None:
            log.scan = log_scan.scan_bytes(log.data)  # looked up per call: a counting seam
        else:
            log.scan = log_scan.scan_bytes(log.data, point.end, point.commit + 1, point.seq + 1)
            log.scan.resumed = point
    _check_pieces(log, point.end if point is not None else 0)
    return log


def _frame_crc(data: bytes, frame: Frame) -> int:
    return int(HEADER.unpack_from(data, frame.offset)[3])


def _first_seq_of(frame: Frame) -> int | None:
    return int(frame.events[0]["seq"]) if frame.events else None


def _check_pieces(log: SessionLog, resumed_at: int = 0) -> None:
    """Continuity across pieces, and damage named by its file (see the module doc).

    Pieces (and the start of a piece) before ``resumed_at`` were checked when
    the snapshot that covers them was written, and are the same bytes.
    """
    scan, pieces = log.scan, log.pieces
    if not pieces:
        return
    frames = scan.frames
    for index, piece in enumerate(pieces):
        start = log.starts[index]
        end = log.starts[index + 1] if index + 1 < len(pieces) else len(log.data)
        if end <= resumed_at and start < resumed_at:
            continue
        if start < resumed_at:
            if piece.seed is not None and end <= scan.end:
                _check_seed_end(log, piece, end)
                if scan.corruption is not None:
                    return
            continue
        if start == end:
            if piece.seed is not None:
                _corrupt_at(log, start, f"{piece.name} is empty")
                return
            continue  # an own segment just rolled to: nothing in it yet
        if start >= scan.end:
            break  # the scan stopped before this piece: its damage is named below
        at = bisect.bisect_left(frames, start, key=lambda f: f.offset)
        first = frames[at] if at < len(frames) else None
        seq = _first_seq_of(first) if first is not None else None
        if (
            first is None
            or first.offset != start
            or first.commit != piece.first_commit
            or (seq is not None and seq != piece.first_seq)
        ):
            reason = f"{piece.name} does not start at commit {piece.first_commit}"
            _corrupt_at(log, start, f"{reason}, seq {piece.first_seq}")
            return
        if piece.seed is not None and end <= scan.end:
            _check_seed_end(log, piece, end)
            if scan.corruption is not None:
                return
    _name_scan_damage(log)
    if scan.corruption is None:
        _check_vouched(log)


def _check_vouched(log: SessionLog) -> None:
    """Commits the log's own files vouch for must be in it (acknowledged data lost otherwise).

    An ``.idx`` record is written only after its commit's fsync returned (and
    a rebuilt ``.idx`` only after the segment's fsync), so a record of the
    active segment whose frame ends past the whole frames read proves that
    acknowledged commits were on disk and are gone: the file was cut short
    since. So does the active segment's name, which says which commit came
    before it (a roll creates it after the last frame of the sealed one is
    durable). Either way it is corruption, never a torn tail to cut: a writer
    would otherwise rebuild the ``.idx`` from the short file and the loss
    would leave no trace. The message and details name the missing commits.
    """
    active, scan = log.active, log.scan
    if active is None:
        return
    start = log.active_start
    vouched_commit, vouched_end = active.first_commit - 1, 0
    record = _last_index_record(active.path)
    if record is not None and record.commit > vouched_commit:
        vouched_commit, vouched_end = record.commit, record.end
    held = scan.end - start
    if scan.last_commit >= vouched_commit and held >= vouched_end:
        return
    if held > 0 or len(log.pieces) == 1:
        where = (active, max(held, 0))
    else:  # nothing of the active segment: the loss is at the end of the piece before it
        piece, offset = log.locate(max(scan.end - 1, 0))
        where = (piece, offset + 1 if scan.end else 0)
    first_missing = scan.last_commit + 1
    _corrupt_at(
        log,
        scan.end,
        f"commits {first_missing} to {vouched_commit} were acknowledged "
        f"({active.name} and its index vouch for them) and are missing: the file was cut short",
        where,
        firstMissingCommit=first_missing,
        lastMissingCommit=vouched_commit,
    )


def _last_index_record(segment: Path) -> IndexRecord | None:
    """The last whole record of a segment's ``.idx`` that passes its checksum (of the last two).

    Reads the header and one or two fixed-size records from the end, never the
    whole file. ``None`` when there is no usable index (a cache: missing or of
    another layout means no evidence, not damage).
    """
    try:
        fd = open_no_follow(segment.with_suffix(INDEX_SUFFIX), os.O_RDONLY)
    except OSError:
        return None
    try:
        header = index_header()
        if os.pread(fd, len(header), 0) != header:
            return None
        count = (os.fstat(fd).st_size - len(header)) // RECORD_SIZE
        for position in range(count - 1, max(count - 3, -1), -1):
            at = len(header) + position * RECORD_SIZE
            record = IndexRecord.from_bytes(os.pread(fd, RECORD_SIZE, at))
            if record is not None:
                return record
        return None
    finally:
        os.close(fd)


def _check_seed_end(log: SessionLog, piece: Piece, end: int) -> None:
    """A seed must end exactly on a frame of commit ``endCommit`` with checksum ``lastCrc``."""
    assert piece.seed is not None
    frames = log.scan.frames
    at = bisect.bisect_left(frames, end, key=lambda f: f.end)
    last = frames[at] if at < len(frames) else None
    if (
        last is None
        or last.end != end
        or last.commit != piece.seed.end_commit
        or _frame_crc(log.data, last) != piece.seed.last_crc
    ):
        reason = f"{piece.name} does not end on commit {piece.seed.end_commit}"
        start = end - piece.seed.end
        _corrupt_at(log, end, f"{reason} with checksum {piece.seed.last_crc}", (piece, end - start))


def _corrupt_at(
    log: SessionLog,
    virtual: int,
    reason: str,
    where: tuple[Piece, int] | None = None,
    **details: int,
) -> None:
    """Corruption at a virtual offset: history ends at the last frame before it.

    ``where`` names the file and offset when the virtual offset is ambiguous
    (the end of a seed is also the start of the next piece); ``details`` are
    added to the error's.
    """
    scan = log.scan
    keep = bisect.bisect_right(scan.frames, virtual, key=lambda f: f.end)
    del scan.frames[keep:]
    scan.end = scan.frames[-1].end if scan.frames else 0
    scan.torn_tail = None
    piece, offset = where or log.locate(virtual)
    after = scan.last_seq
    scan.corruption = CorruptLog(
        f"{reason} (byte {offset} of {piece.name}, after seq {after})",
        file=piece.name,
        offset=offset,
        afterSeq=after,
        **details,
    )


def _name_scan_damage(log: SessionLog) -> None:
    """Name the file of damage the frame scan found; a torn tail is only the last own piece's."""
    scan = log.scan
    if scan.corruption is not None:
        details = scan.corruption.details
        virtual = details.get("offset")
        if isinstance(virtual, int):
            piece, offset = log.locate(virtual)
            details["offset"], details["file"] = offset, piece.name
            if len(log.pieces) > 1:
                scan.corruption = CorruptLog(f"{piece.name}: {scan.corruption.message}", **details)
        return
    torn = scan.torn_tail
    if torn is not None and (log.active is None or torn.offset < log.active_start):
        piece, _ = log.locate(torn.offset)
        _corrupt_at(log, torn.offset, f"{piece.name} ends inside a commit that later files follow")


def read_frame(path: Path, offset: int, end: int) -> tuple[Frame, int] | None:
    """The verified frame at ``offset`` of a file, and its payload CRC, if it ends at ``end``."""
    try:
        fd = open_no_follow(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.pread(fd, end - offset, offset) if end > offset else b""
    finally:
        os.close(fd)
    try:
        frame = decode_frame(data, 0)
    except (BranchwiseError, Incomplete):
        return None
    if frame.end != len(data):
        return None
    return Frame(frame.commit, frame.events, offset, end), int(HEADER.unpack_from(data, 0)[3])


def read_log_from(directory: Path, manifest: LogLayout, start: int) -> bytes:
    """The virtual log's bytes from virtual offset ``start`` on (a reader catching up).

    Pieces that end before ``start`` are only sized, never read: sealed
    segments and seeds do not change, so a catch-up after one turn of a long
    conversation reads the last segment's new bytes, not the whole history.

    Raises:
        UnsafePath: a log file is a symbolic link.
        CorruptLog: a seed that must be read is missing or short.
    """
    manifest, pieces = _current_pieces(directory, manifest)
    chunks, at = [], 0
    for piece in pieces:
        if piece.seed is not None:
            size = piece.seed.end
        else:
            refuse_link(piece.path)
            try:
                size = os.stat(piece.path, follow_symlinks=False).st_size
            except FileNotFoundError:
                size = 0
        if at + size <= start and piece is not pieces[-1]:
            at += size
            continue
        skip = max(0, start - at)
        chunk = read_piece(piece, skip)
        chunks.append(chunk)
        at += skip + len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def log_identity(directory: Path, manifest: LogLayout) -> tuple[int, int, int]:
    """``(device, inode, virtual size)`` of a session's log, without reading it.

    The inode is the first piece's: a migration links ``events.log`` as the
    first segment and a fork links the parent's, so the identity of history a
    reader already saw survives both. A log with no file yet is ``(0, 0, 0)``.
    """
    pieces = log_pieces(directory, manifest)
    identity: tuple[int, int] | None = None
    size = 0
    for piece in pieces:
        try:
            status = os.lstat(piece.path)
        except FileNotFoundError:
            continue
        if identity is None:
            identity = (status.st_dev, status.st_ino)
        size += piece.seed.end if piece.seed is not None else status.st_size
    device, inode = identity or (0, 0)
    return device, inode, size


def disk_usage(directory: Path, manifest: LogLayout) -> dict[str, int]:
    """Bytes a session's log files take: ``ownBytes`` and ``sharedBytes``.

    A file with one link is the session's own; a file with more (a seed, or
    an own segment a fork linked) is shared with other sessions, so deleting
    this session would not free it. Sidecars count like their segments.
    Format 1 has one own ``events.log``.
    """
    usage = {"ownBytes": 0, "sharedBytes": 0}
    if manifest.segmented:
        folder = directory / manifest.log_dir
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            names = []
        paths = [folder / name for name in names if not name.startswith(".")]
    else:
        paths = [directory / LEGACY_LOG]
    for path in paths:
        try:
            status = os.lstat(path)
        except FileNotFoundError:
            continue
        key = "sharedBytes" if status.st_nlink > 1 else "ownBytes"
        usage[key] += status.st_size
    return usage
