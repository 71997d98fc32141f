"""The caches beside each segment: turn index ``.idx``, turn ids ``.tix``, blobs ``.blobs``.

A fork validates its target by reading one frame (the ``.idx`` record of the
boundary says where it is), and fork targets come from ``.idx``/``.tix``
instead of a replay. They are caches (docs/storage.md, "Invariants" 5): only the
writer writes them, after the commit's fsync (plain writes, fsynced at roll
and close), and a missing, short, damaged or old sidecar never changes an
answer: readers check every record's checksum and the frame it points at,
and otherwise fall back to the log.

``.idx``: a 16-byte header (magic ``BWIX``, format version, tracker version,
CRC32 of the first 12 bytes), then fixed-size records, one per turn a commit
closes, in seq order: ``lastSeq, commit, offset, end, frameCrc, flags,
recordCrc`` (and, when the segment is sealed at a roll, a last record with
only :data:`SEALS_SEGMENT` set, naming its last frame). ``.blobs``:
``{"commit", "blobs"}`` for each commit holding a checkpoint.

``.tix``: binary, so cold fork targets read a turn without decoding JSON. A
16-byte header (magic ``BWTX``, format version, tracker version, CRC32 of the
first 12 bytes), then one record per turn record of the ``.idx``: ``lastSeq,
commit, startSeq, index, flags, len(turnId), len(messageId)`` (little-endian
``QQQIIHH``; a message length of 0xFFFF is "no answer"), the two ids in UTF-8,
and a **chained CRC32**: the CRC of every byte of the file before it. So one
CRC call over a whole file vouches for every record in it; only a file that
fails it (a torn last record, damage) is walked record by record, keeping the
records before the first that fails. ``index`` is the turn's 1-based position,
so a reader sees a turn that never closed as a gap. A ``.tix`` of the earlier
JSON layout fails the header check: it is not used (fork targets replay) until
a writer rewrites it.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from branchwise.core.fs.atomic import write_all
from branchwise.core.fs.safe_open import open_no_follow
from branchwise.core.log.frames import HEADER, Frame, encode_record, iter_records

INDEX_SUFFIX = ".idx"
TURNS_SUFFIX = ".tix"
BLOBS_SUFFIX = ".blobs"
SIDECAR_SUFFIXES = (INDEX_SUFFIX, TURNS_SUFFIX, BLOBS_SUFFIX)
INDEX_MAGIC = b"BWIX"
INDEX_VERSION = 1
TURNS_MAGIC = b"BWTX"
TURNS_VERSION = 1
TRACKER_VERSION = 1
"""Bumped when the turn rules change what a record says; older indexes are then not used."""
_HEAD = struct.Struct("<4sHH4xI")
_RECORD = struct.Struct("<QQQQIII")
_RECORD_BODY = struct.Struct("<QQQQII")
RECORD_SIZE = _RECORD.size
_TURN = struct.Struct("<QQQIIHH")
TURN_RECORD_MIN = _TURN.size + 4
"""The fewest bytes a ``.tix`` record takes (empty ids, its chained CRC)."""
_CRC = struct.Struct("<I")
NO_MESSAGE = 0xFFFF
"""The message-id length of a turn record whose turn has no answer."""

CLOSES_TURN = 1
CLOSING_COMMIT_SPILLS = 2
AUTHORITY_OPEN = 4
HOLDS_CHECKPOINT = 8
SEALS_SEGMENT = 16
"""Not a turn: the last frame of a sealed segment, written at roll (a fork's seed bound)."""


class ClosedTurn(Protocol):
    """What a ``.idx``/``.tix`` record says of a turn a commit closed."""

    @property
    def turn_id(self) -> str: ...
    @property
    def message_id(self) -> str | None: ...
    @property
    def start_seq(self) -> int: ...
    @property
    def index(self) -> int: ...
    @property
    def boundary_sequence(self) -> int | None: ...
    @property
    def open_authority(self) -> tuple[str, ...]: ...
    @property
    def closing_commit_spills(self) -> bool: ...


class TurnRules(Protocol):
    """What the sidecars need to know of the meaning of commits.

    The log stores bytes and does not know event kinds: the projection's turn
    rules (:class:`~branchwise.core.projection.turns.TurnTracker`) say which
    turns a commit closes and which blobs its checkpoints hold, and keep the
    turns' state as commits are applied.
    """

    def apply(self, events: list[dict[str, Any]]) -> None:
        """Take in one commit's events."""
        ...

    def closes(self, events: list[dict[str, Any]]) -> tuple[list[str], list[str]] | None:
        """The turn ids a commit ends and its checkpoints' blobs; ``None`` when it does neither."""
        ...

    def turn(self, turn_id: str) -> ClosedTurn | None:
        """The turn with this id as of the commits applied so far."""
        ...


def index_header() -> bytes:
    """The 16 bytes every ``.idx`` starts with."""
    head = _HEAD.pack(INDEX_MAGIC, INDEX_VERSION, TRACKER_VERSION, 0)[:12]
    return head + struct.pack("<I", zlib.crc32(head))


def turns_header() -> bytes:
    """The 16 bytes every ``.tix`` starts with."""
    head = _HEAD.pack(TURNS_MAGIC, TURNS_VERSION, TRACKER_VERSION, 0)[:12]
    return head + struct.pack("<I", zlib.crc32(head))


def turn_record(record: IndexRecord, entry: TurnEntry, chain: int) -> tuple[bytes, int]:
    """One ``.tix`` record after bytes whose CRC32 is ``chain``; returns it and the new chain.

    Raises:
        ValueError: an id too long for the record (over 65,534 bytes of UTF-8).
    """
    turn_id = entry.turn_id.encode()
    message_id = b"" if entry.message_id is None else entry.message_id.encode()
    if len(turn_id) >= NO_MESSAGE or len(message_id) >= NO_MESSAGE:
        raise ValueError("an id is too long for a turn record")
    body = _TURN.pack(
        record.last_seq,
        record.commit,
        entry.start_seq,
        entry.index,
        record.flags,
        len(turn_id),
        NO_MESSAGE if entry.message_id is None else len(message_id),
    )
    body += turn_id + message_id
    crc = zlib.crc32(body, chain)
    tail = _CRC.pack(crc)
    return body + tail, zlib.crc32(tail, crc)


@dataclass(frozen=True, slots=True)
class IndexRecord:
    """One ``.idx`` record: a turn closed by the commit whose frame is at ``offset``.

    Attributes:
        last_seq: the commit's last seq (the turn's boundary).
        commit: the commit number.
        offset: where the frame starts in its segment.
        end: where it ends.
        frame_crc: the frame's payload CRC32.
        flags: :data:`CLOSES_TURN`, :data:`CLOSING_COMMIT_SPILLS`,
            :data:`AUTHORITY_OPEN`, :data:`HOLDS_CHECKPOINT`.
    """

    last_seq: int
    commit: int
    offset: int
    end: int
    frame_crc: int
    flags: int

    def to_bytes(self) -> bytes:
        """The fixed-size record, with its own checksum."""
        body = _RECORD_BODY.pack(
            self.last_seq, self.commit, self.offset, self.end, self.frame_crc, self.flags
        )
        return body + struct.pack("<I", zlib.crc32(body))

    @classmethod
    def from_bytes(cls, data: bytes | memoryview, offset: int = 0) -> IndexRecord | None:
        """The record at ``offset``, or ``None`` if it is short or fails its checksum."""
        if len(data) - offset < RECORD_SIZE:
            return None
        *fields, crc = _RECORD.unpack_from(data, offset)
        if zlib.crc32(data[offset : offset + RECORD_SIZE - 4]) != crc:
            return None
        return cls(*fields)


@dataclass(frozen=True, slots=True)
class TurnEntry:
    """One ``.tix`` record: which turn an ``.idx`` record closes."""

    turn_id: str
    message_id: str | None
    start_seq: int
    index: int


@dataclass(frozen=True, slots=True)
class CommitEntries:
    """What one commit adds to the sidecars."""

    records: tuple[tuple[IndexRecord, TurnEntry], ...]
    blobs: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.records or self.blobs)


_NO_ENTRIES = CommitEntries((), ())


def frame_crc(data: bytes | bytearray | memoryview, offset: int) -> int:
    """The payload CRC32 the frame header at ``offset`` holds."""
    return int(HEADER.unpack_from(data, offset)[3])


def entries_for(
    commit: int,
    events: list[dict[str, Any]],
    offset: int,
    end: int,
    crc: int,
    tracker: TurnRules,
) -> CommitEntries:
    """The sidecar entries of one commit, from the tracker state right after applying it.

    ``offset``/``end`` are the frame's place in its segment.
    """
    marks = tracker.closes(events)
    if marks is None:
        return _NO_ENTRIES  # most commits: a turn's start, a partial answer
    closing, blobs = marks
    last_seq = int(events[-1]["seq"])
    records = []
    for turn_id in dict.fromkeys(closing):
        turn = tracker.turn(turn_id)
        if turn is None or turn.boundary_sequence != last_seq:
            continue
        flags = CLOSES_TURN
        if turn.closing_commit_spills:
            flags |= CLOSING_COMMIT_SPILLS
        if turn.open_authority:
            flags |= AUTHORITY_OPEN
        if blobs:
            flags |= HOLDS_CHECKPOINT
        record = IndexRecord(last_seq, commit, offset, end, crc, flags)
        entry = TurnEntry(turn.turn_id, turn.message_id, turn.start_seq, turn.index)
        records.append((record, entry))
    return CommitEntries(tuple(records), tuple(blobs))


TURNS_BUFFERED = 32
"""How many ``.tix`` records a writer keeps before writing them (one write, not one per turn)."""


class SidecarWriter:
    """Appends one segment's sidecar records (the segment writer owns one).

    Writes are plain (no fsync per commit): :meth:`sync` makes them durable at
    roll and close. ``.idx`` and ``.blobs`` records are written right after
    their commit's fsync (a fork finds its boundary in the ``.idx`` and the
    blobs to link in the ``.blobs``). ``.tix`` records are kept and written
    :data:`TURNS_BUFFERED` at a time, and at roll and close: only cold fork
    targets read them, and a ``.tix`` that lags (a live writer, a crash) only
    makes them replay the few frames after its last record. A failure to
    write a cache is not a failed commit: the writer stops writing sidecars
    (a reopen rebuilds them) and goes on.
    """

    def __init__(self, segment: Path) -> None:
        self.segment = segment
        self._fds: dict[str, int] = {}
        self.broken = False
        self._chain = 0  # CRC32 of the whole .tix so far, buffered records included (chained)
        self._turns = bytearray()  # .tix records not written yet
        self._buffered = 0
        try:
            for suffix in SIDECAR_SUFFIXES:
                fd = open_no_follow(
                    segment.with_suffix(suffix), os.O_WRONLY | os.O_CREAT | os.O_APPEND
                )
                self._fds[suffix] = fd
                if suffix == INDEX_SUFFIX and os.fstat(fd).st_size == 0:
                    write_all(fd, index_header())
                elif suffix == TURNS_SUFFIX:
                    if os.fstat(fd).st_size == 0:
                        write_all(fd, turns_header())
                    self._chain = zlib.crc32(_read(segment.with_suffix(suffix)) or b"")
        except OSError:
            self._fail()

    def seal(self, record: IndexRecord) -> None:
        """Append the record of the segment's last frame (at roll)."""
        if self.broken:
            return
        try:
            write_all(self._fds[INDEX_SUFFIX], record.to_bytes())
        except OSError:
            self._fail()

    def add(self, entries: CommitEntries, commit: int) -> None:
        """Append one commit's entries (after that commit's fsync returned)."""
        if self.broken or not entries:
            return
        try:
            if entries.records:
                records = entries.records
                index = records[0][0].to_bytes() if len(records) == 1 else None
                _write(self._fds[INDEX_SUFFIX], index or b"".join(r.to_bytes() for r, _ in records))
                chain, turns = self._chain, self._turns
                for record, turn in records:
                    piece, chain = turn_record(record, turn, chain)
                    turns += piece
                self._chain = chain
                self._buffered += len(records)
                if self._buffered >= TURNS_BUFFERED:
                    self._write_turns()
            if entries.blobs:
                write_all(
                    self._fds[BLOBS_SUFFIX],
                    encode_record({"commit": commit, "blobs": list(entries.blobs)}),
                )
        except (OSError, ValueError):
            self._fail()

    def _write_turns(self) -> None:
        """Write the kept ``.tix`` records."""
        turns, self._turns, self._buffered = self._turns, bytearray(), 0
        if turns:
            write_all(self._fds[TURNS_SUFFIX], turns)

    def _fail(self) -> None:
        """Stop writing sidecars; remove them so nobody reads a half-written cache."""
        self.broken = True
        self._turns, self._buffered = bytearray(), 0
        self.close()
        for suffix in SIDECAR_SUFFIXES:
            with contextlib.suppress(OSError):
                os.unlink(self.segment.with_suffix(suffix))

    def sync(self) -> None:
        """Write the kept records and make every record durable (best effort: a cache)."""
        if not self.broken and self._fds:
            try:
                self._write_turns()
            except OSError:
                self._fail()
                return
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.fsync(fd)

    def close(self) -> None:
        """Write the kept records (unless broken) and close the files (idempotent)."""
        if not self.broken and self._fds:
            with contextlib.suppress(OSError):
                self._write_turns()
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)


def _write(fd: int, data: bytes) -> None:
    """One ``os.write`` of a small record, finishing a short write with :func:`write_all`."""
    written = os.write(fd, data)
    if written != len(data):
        write_all(fd, memoryview(data)[written:])


def sidecar_bytes(
    entries: list[tuple[CommitEntries, int]], base: Mapping[str, bytes] | None = None
) -> dict[str, bytes]:
    """The whole content of a segment's three sidecars for these entries, by suffix.

    ``base``: the files' bytes for the segment's earlier frames (header
    included), which the entries' records follow.
    """
    idx = bytearray(base[INDEX_SUFFIX] if base is not None else index_header())
    tix = bytearray(base[TURNS_SUFFIX] if base is not None else turns_header())
    chain = zlib.crc32(tix)
    blobs = bytearray(base[BLOBS_SUFFIX] if base is not None else b"")
    for commit_entries, commit in entries:
        for record, turn in commit_entries.records:
            idx += record.to_bytes()
            piece, chain = turn_record(record, turn, chain)
            tix += piece
        if commit_entries.blobs:
            blobs += encode_record({"commit": commit, "blobs": list(commit_entries.blobs)})
    return {INDEX_SUFFIX: bytes(idx), TURNS_SUFFIX: bytes(tix), BLOBS_SUFFIX: bytes(blobs)}


def write_sidecars(
    segment: Path,
    entries: list[tuple[CommitEntries, int]],
    *,
    only_changed: bool = False,
    durable: bool = True,
    base: Mapping[str, bytes] | None = None,
    sync_segment: bool = False,
) -> None:
    """Write a segment's sidecars whole, durably, replacing whatever was there.

    Used when the entries are known at once (a migration, a published
    session, a writer rebuilding the active segment's): each file is written
    under a temporary name, fsynced and renamed, so a reader sees the old
    cache or the new one. ``only_changed`` leaves a file that already holds
    exactly its bytes alone (a writer's open usually finds them right);
    ``durable=False`` skips the fsyncs (a cache a crash may lose: a new fork's
    first own segment, whose writer rebuilds it if it is gone). ``base``: see
    :func:`sidecar_bytes`. ``sync_segment`` fsyncs the segment itself before
    the first file is written: for entries read from bytes a crashed writer
    may have left unsynced, since a fork takes an ``.idx`` record as proof
    that the bytes up to its frame are durable.
    """
    for suffix, data in sidecar_bytes(entries, base).items():
        final = segment.with_suffix(suffix)
        if only_changed and _read(final) == data:
            continue
        if sync_segment:
            fd = open_no_follow(segment, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            sync_segment = False
        tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
        fd = open_no_follow(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)


def sidecar_entries(
    frames: list[Frame], tracker: TurnRules, data: bytes, start: int
) -> Iterator[tuple[CommitEntries, int]]:
    """Apply ``frames`` to ``tracker`` and yield the entries of those at or after ``start``.

    Offsets in the entries are relative to ``start`` (the segment's first byte
    in ``data``, the virtual log).
    """
    apply = tracker.apply
    for frame in frames:
        apply(frame.events)
        if frame.offset >= start:
            entries = entries_for(
                frame.commit,
                frame.events,
                frame.offset - start,
                frame.end - start,
                frame_crc(data, frame.offset),
                tracker,
            )
            if entries:
                yield entries, frame.commit


# -- reading -------------------------------------------------------------------------


def _read(path: Path) -> bytes | None:
    try:
        fd = open_no_follow(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)


def read_index(segment: Path) -> list[IndexRecord] | None:
    """Every whole, verified record of a segment's ``.idx`` (``None``: no usable index)."""
    data = _read(segment.with_suffix(INDEX_SUFFIX))
    if data is None or data[:16] != index_header():
        return None
    records = []
    for offset in range(16, len(data) - RECORD_SIZE + 1, RECORD_SIZE):
        record = IndexRecord.from_bytes(data, offset)
        if record is None:
            break
        records.append(record)
    return records


def read_seal(segment: Path) -> IndexRecord | None:
    """A sealed segment's seal record: the ``.idx``'s last record, and nothing else read.

    Records are fixed-size, so the last one is found by the file's size: a
    fork reads one record per sealed segment it links, whatever the number of
    turns in it (reading the whole index made a fork's cost grow with the
    session). ``None`` when the header, the record's checksum or its flags
    do not say it is a seal (no index, a torn or damaged one, an unsealed
    segment); the caller then finds the bound by other means.
    """
    try:
        fd = open_no_follow(segment.with_suffix(INDEX_SUFFIX), os.O_RDONLY)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size < 16 + RECORD_SIZE or (size - 16) % RECORD_SIZE:
            return None
        if os.pread(fd, 16, 0) != index_header():
            return None
        record = IndexRecord.from_bytes(os.pread(fd, RECORD_SIZE, size - RECORD_SIZE))
    except OSError:
        return None
    finally:
        os.close(fd)
    if record is None or record.flags != SEALS_SEGMENT:
        return None
    return record


def find_record(segment: Path, last_seq: int) -> tuple[IndexRecord, int] | None:
    """Binary-search a segment's ``.idx`` for the record with this ``lastSeq``.

    Reads only the header and about log2(n) records. Returns the record and
    its position (0-based), or ``None`` when the index cannot answer (missing,
    damaged on the path of the search, no such record).
    """
    try:
        fd = open_no_follow(segment.with_suffix(INDEX_SUFFIX), os.O_RDONLY)
    except OSError:
        return None
    try:
        if os.pread(fd, 16, 0) != index_header():
            return None
        count = (os.fstat(fd).st_size - 16) // RECORD_SIZE
        low, high = 0, count - 1
        while low <= high:
            middle = (low + high) // 2
            record = IndexRecord.from_bytes(os.pread(fd, RECORD_SIZE, 16 + middle * RECORD_SIZE))
            if record is None:
                return None
            if record.last_seq == last_seq:
                while middle > 0:  # the first record of that commit (it may close two turns)
                    earlier = IndexRecord.from_bytes(
                        os.pread(fd, RECORD_SIZE, 16 + (middle - 1) * RECORD_SIZE)
                    )
                    if earlier is None or earlier.last_seq != last_seq:
                        break
                    middle, record = middle - 1, earlier
                return record, middle
            if record.last_seq < last_seq:
                low = middle + 1
            else:
                high = middle - 1
        return None
    finally:
        os.close(fd)


class TurnRow(NamedTuple):
    """One verified ``.tix`` record: a turn closed in this segment, as fork targets need it."""

    turn_id: str
    message_id: str | None
    last_seq: int
    commit: int
    start_seq: int
    number: int  # the turn's 1-based position (``index`` is tuple's)
    flags: int


def read_turn_file(segment: Path) -> bytes | None:
    """The bytes of a segment's ``.tix`` if it is of this layout (``None``: missing or not)."""
    data = _read(segment.with_suffix(TURNS_SUFFIX))
    if data is None or data[:16] != turns_header():
        return None
    return data


def parse_turn_rows(
    data: bytes, start: int = 16, chain: int | None = None
) -> tuple[list[TurnRow], int, int]:
    """The verified records of ``.tix`` bytes from ``start`` on (a record boundary).

    ``chain`` is the CRC32 of ``data[:start]`` (computed when not given).
    Returns the rows, the offset after the last verified one and the CRC32
    of the bytes before that offset, so a later call can go on from there
    (the turn table, :mod:`~branchwise.core.log.turn_table`, does). One pass
    of ``struct`` reads and two ``decode`` calls per record, then one CRC of
    the bytes read (the chained CRC of the last record); only when that fails
    is each record's chained CRC checked, to keep the ones before the damage.
    """
    if chain is None:
        chain = zlib.crc32(data[:start])
    rows: list[TurnRow] = []
    offset, size, head = start, len(data), _TURN.size
    unpack, append, new = _TURN.unpack_from, rows.append, tuple.__new__
    try:
        while size - offset >= head:
            last_seq, commit, start_seq, number, flags, turn_len, message_len = unpack(data, offset)
            ids = offset + head
            message_at = ids + turn_len
            crc_at = message_at + (0 if message_len == NO_MESSAGE else message_len)
            if crc_at + 4 > size:
                break
            message_id = None if message_len == NO_MESSAGE else data[message_at:crc_at].decode()
            turn_id = data[ids:message_at].decode()
            # tuple.__new__ skips the named tuple's Python-level constructor (a third of the time)
            append(new(TurnRow, (turn_id, message_id, last_seq, commit, start_seq, number, flags)))
            offset = crc_at + 4
    except UnicodeDecodeError:
        pass  # damage: the checks below keep the records before it
    if not rows:
        return rows, start, chain
    stored = _CRC.unpack_from(data, offset - 4)[0]
    if zlib.crc32(data[start : offset - 4], chain) == stored:
        return rows, offset, zlib.crc32(data[offset - 4 : offset], stored)
    count, offset, chain = _verified_count(data, len(rows), start, chain)
    return rows[:count], offset, chain


def _verified_count(data: bytes, parsed: int, start: int, chain: int) -> tuple[int, int, int]:
    """How many of the first ``parsed`` records from ``start`` pass their chained CRC.

    Returns that count, the offset after them and the CRC32 of the bytes before it.
    """
    offset = start
    for number in range(parsed):
        turn_len, message_len = _TURN.unpack_from(data, offset)[5:]
        crc_at = offset + _TURN.size + turn_len + (0 if message_len == NO_MESSAGE else message_len)
        crc = zlib.crc32(data[offset:crc_at], chain)
        if _CRC.unpack_from(data, crc_at)[0] != crc:
            return number, offset, chain
        chain, offset = zlib.crc32(data[crc_at : crc_at + 4], crc), crc_at + 4
    return parsed, offset, chain


def read_blob_entries(segment: Path, through_commit: int) -> list[str] | None:
    """Blob names the ``.blobs`` of a segment lists up to a commit (``None``: no file)."""
    data = _read(segment.with_suffix(BLOBS_SUFFIX))
    if data is None:
        return None
    names: list[str] = []
    for record in iter_records(data):
        commit, blobs = record.get("commit"), record.get("blobs")
        if not isinstance(commit, int) or not isinstance(blobs, list) or commit > through_commit:
            break
        names.extend(str(name) for name in blobs)
    return names


def sidecar_prefixes(
    segment: Path, expected: Mapping[str, tuple[int, int]]
) -> dict[str, bytes] | None:
    """The first bytes of each sidecar of ``segment``, if they have the length and CRC32 expected.

    ``expected`` maps each suffix to ``(length, crc)``; ``None`` when any file
    is missing, shorter or different (a projection snapshot then does not
    stand in for the replay that rebuilds them).
    """
    found: dict[str, bytes] = {}
    for suffix in SIDECAR_SUFFIXES:
        if suffix not in expected:
            return None
        length, crc = expected[suffix]
        data = _read(segment.with_suffix(suffix))
        if data is None or len(data) < length or zlib.crc32(data[:length]) != crc:
            return None
        found[suffix] = data[:length]
    return found
