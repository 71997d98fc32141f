"""The projection snapshot: a rebuildable cache of a session's state beside its log.

Opening a big session replays every commit (hundreds of milliseconds per ten
thousand turns). The writer therefore keeps ``<log>/projection.snap``: the
projection (:mod:`~branchwise.core.projection.snapshot`) as of a frame end,
and the exact bytes of history it stands for, identified by a *key*:

- ``bytes``/``crc``: the length of the virtual log it covers (seeds, then own
  segments, laid end to end) and the CRC32 of exactly those bytes;
- ``pieces``: per covered file, ``[length, firstCommit, firstSeq, lastCommit,
  lastCrc]`` (the last one possibly covered only in part);
- ``commit``, ``seq``, ``frame``: the last covered commit, seq, and that
  frame's offset and checksum; ``seedLength``: whose usage the tokens count.

Bytes already in a segment never change (docs/storage.md, "Invariants" 1), so a key
that matches stays true: a reader checksums the covered prefix (about 4 ms
for 26 MB, against 80 ms or more to decode it), checks the layout, restores
the state and decodes only the frames after it. Every byte is still
verified: the covered ones by one checksum against bytes that were verified
frame by frame when the snapshot was written, the rest frame by frame. Any
mismatch (a file missing, short, damaged, of another format or schema, a
rewound log) means the snapshot is not used: the log is replayed in full and
answers are what they would be without it. It is a cache, never history:
``session verify`` names an unusable one as a note, never as damage.

Writing it is never on a commit's path: the lease holder writes it after a
writer open whose replay covered at least a threshold of bytes, on a
background thread, under a temporary name then ``os.replace`` (no fsync: a
file a crash cut short fails its checksums and is rebuilt).

A fork links its source's snapshot into the child when the snapshot covers
only inherited history (:func:`inheritable_snapshot`): the child's seeds are
the same bytes, so the key holds for the child too (with the inherited usage
not counted). A link, never a copy: where the file system refuses links the
child simply has none until its first writer open writes its own.

File layout: 8 bytes ``BWSNAP`` + format (u16); then four sections, each a
u32 length, a u32 CRC32 and the payload: the key (JSON), the turn rules'
state (JSON, all fork targets need), the rest of the projection and the
writer's sidecar entries (JSON), and every message's text (UTF-8).
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
import threading
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from branchwise.core.errors import BranchwiseError
from branchwise.core.fs.atomic import write_cache_file
from branchwise.core.fs.safe_open import open_no_follow
from branchwise.core.log.frames import Frame
from branchwise.core.log.scan import ResumePoint
from branchwise.core.log.segments import LogLayout, SessionLog, log_pieces, scan_session_log
from branchwise.core.log.sidecars import (
    SIDECAR_SUFFIXES,
    CommitEntries,
    frame_crc,
    sidecar_bytes,
    sidecar_prefixes,
)
from branchwise.core.projection.projection import Projection
from branchwise.core.projection.snapshot import (
    ProjectionState,
    StateMismatch,
    TrackerState,
    capture,
    restore,
    restore_tracker,
    schema,
)
from branchwise.core.projection.turns import TurnTracker

SNAPSHOT_FILE = "projection.snap"
SNAPSHOT_FORMAT = 1
SNAPSHOT_MIN_BYTES = 512 * 1024
"""A writer open writes a snapshot once it had to replay at least this many bytes.

The size at which the desktop starts opening a conversation on a preview
(below it, a replay takes a few milliseconds and a snapshot would only cost disk).
"""
_MAGIC = b"BWSNAP"
_START = struct.Struct("<6sH")
_SECTION = struct.Struct("<II")
_KEY, _TRACKER, _REST, _TEXT = range(4)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A snapshot file's key and, when read whole, its state.

    Attributes:
        key: what history it stands for (see the module doc).
        tracker: the turn rules' state (JSON form).
        rest: the rest of the projection and ``entries`` (``None`` when only the
            tracker part was read).
        text: every message's text (``""`` when only the tracker part was read).
    """

    key: dict[str, Any]
    tracker: dict[str, Any]
    rest: dict[str, Any] | None
    text: str

    @property
    def end(self) -> int:
        """The virtual offset the covered history ends at."""
        return int(self.key["bytes"])

    def resume_point(self) -> ResumePoint:
        """Where a scan goes on after this snapshot."""
        offset, crc = self.key["frame"]
        return ResumePoint(self.end, self.key["commit"], self.key["seq"], offset, crc)

    def projection(self, seed_length: int) -> Projection:
        """The projection it holds, counting usage as a session of ``seed_length`` does.

        Raises:
            StateMismatch: the stored state has the wrong shape.
        """
        if self.rest is None:
            raise StateMismatch("only the tracker part was read")
        state = ProjectionState(
            TrackerState(self.tracker["turns"], self.tracker["rest"]),
            self.rest["messages"],
            self.rest["extra"],
            self.text,
        )
        projection = restore(state)
        if self.key["seedLength"] != seed_length:
            # Usable only when every event so far is inherited (see unusable_because).
            projection.input_tokens = projection.output_tokens = 0
        projection.seed_length = seed_length
        return projection

    def tracker_state(self) -> TurnTracker:
        """A bare tracker holding the turn rules' state (what fork targets read).

        Raises:
            StateMismatch: the stored state has the wrong shape.
        """
        return restore_tracker(self.tracker)

    def sidecar_base(self, log: SessionLog) -> dict[str, bytes] | None:
        """The active segment's sidecar bytes for the frames this snapshot covers.

        ``None`` unless the snapshot ends in the log's active segment, kept
        the length and checksum of those bytes, and the files still start
        with exactly them.
        """
        kept = self.rest.get("sidecars") if self.rest is not None else None
        active = log.active
        if not isinstance(kept, dict) or active is None:
            return None
        if kept.get("piece") != len(log.pieces) - 1 or len(self.key["pieces"]) != len(log.pieces):
            return None
        files = kept.get("files")
        if not isinstance(files, dict):
            return None
        try:
            expected = {suffix: (int(v[0]), int(v[1])) for suffix, v in files.items()}
        except (TypeError, ValueError, IndexError):
            return None
        return sidecar_prefixes(active.path, expected)


@dataclass(frozen=True, slots=True)
class Resumed:
    """The snapshot a scan resumed after, and what it gives a writer.

    Attributes:
        snapshot: the snapshot.
        sidecar_base: the active segment's sidecar bytes it covers, when it
            ends inside the active segment (a writer open needs them).
        restored: the state it holds: a projection counting usage as this
            session does, or (when only the turn state was read) a bare tracker.
    """

    snapshot: Snapshot
    sidecar_base: dict[str, bytes] | None
    restored: TurnTracker


# -- reading -------------------------------------------------------------------------


def snapshot_path(log: SessionLog) -> Path | None:
    """Where a session's snapshot lives (``None`` for a format-1 session: it has none)."""
    if not log.manifest.segmented or not log.pieces:
        return None
    return log.pieces[0].path.parent / SNAPSHOT_FILE


def read_snapshot(path: Path, *, whole: bool = True) -> Snapshot | None:
    """The snapshot at ``path`` if it is whole and of this format and schema, else ``None``.

    ``whole=False`` reads only the key and the tracker part (what fork
    targets need), not the transcript.
    """
    try:
        fd = open_no_follow(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb", closefd=False) as handle:
            start = handle.read(_START.size)
            if len(start) != _START.size or _START.unpack(start) != (_MAGIC, SNAPSHOT_FORMAT):
                return None
            sections: list[bytes] = []
            for _ in range(4 if whole else 2):
                head = handle.read(_SECTION.size)
                if len(head) != _SECTION.size:
                    return None
                length, crc = _SECTION.unpack(head)
                payload = handle.read(length)
                if len(payload) != length or zlib.crc32(payload) != crc:
                    return None
                sections.append(payload)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        key = orjson.loads(sections[_KEY])
        tracker = orjson.loads(sections[_TRACKER])
        rest = orjson.loads(sections[_REST]) if whole else None
        text = sections[_TEXT].decode("utf-8") if whole else ""
    except (orjson.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(key, dict) or key.get("schema") != schema():
        return None
    if not isinstance(tracker, dict) or (whole and not isinstance(rest, dict)):
        return None
    return Snapshot(key, tracker, rest, text)


def _read_key(path: Path) -> dict[str, Any] | None:
    """A snapshot file's key section alone, if it is whole (nothing else is read)."""
    try:
        fd = open_no_follow(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        start = os.pread(fd, _START.size + _SECTION.size, 0)
        if len(start) != _START.size + _SECTION.size:
            return None
        if _START.unpack_from(start) != (_MAGIC, SNAPSHOT_FORMAT):
            return None
        length, crc = _SECTION.unpack_from(start, _START.size)
        payload = os.pread(fd, length, len(start))
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(payload) != length or zlib.crc32(payload) != crc:
        return None
    try:
        key = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    return key if isinstance(key, dict) else None


def inheritable_snapshot(source_log_dir: Path, seed_bytes: int, seed_count: int) -> Path | None:
    """The source's snapshot file, if it covers only what a fork's seeds inherit.

    Read from the key alone (a fork stays O(1)); whether the child can use it
    is decided, as always, when the child is read. ``seed_bytes``: the
    length of the child's seeds laid end to end; ``seed_count``: how many.
    """
    path = source_log_dir / SNAPSHOT_FILE
    key = _read_key(path)
    if key is None:
        return None
    try:
        fits = int(key["bytes"]) <= seed_bytes and len(key["pieces"]) <= seed_count
    except (KeyError, TypeError, ValueError):
        return None
    return path if fits and key.get("schema") == schema() else None


def unusable_because(snapshot: Snapshot, log: SessionLog) -> str | None:
    """Why ``snapshot`` does not stand for a prefix of ``log`` (``None``: it does).

    Checks the layout of every covered file against the log's pieces (and
    each covered seed's ``end``, ``endCommit`` and ``lastCrc``), the CRC32 of
    the covered bytes, and that its token counts are this session's: equal
    ``seedLength``, or a prefix that is all inherited.
    """
    key = snapshot.key
    try:
        covered, pieces = int(key["bytes"]), key["pieces"]
        if not (0 < covered <= len(log.data)) or len(pieces) > len(log.pieces) or not pieces:
            return "it covers more history than the log holds"
        ends = [*log.starts[1:], len(log.data)]
        for index, (length, first_commit, first_seq, last_commit, last_crc) in enumerate(pieces):
            piece, start = log.pieces[index], log.starts[index]
            last = index == len(pieces) - 1
            size = ends[index] - start
            if (piece.first_commit, piece.first_seq) != (first_commit, first_seq):
                return f"{piece.name} does not start where it did"
            if size < length or (not last and size != length):
                return f"{piece.name} is not as long as it was"
            if last and start + length != covered:
                return "its layout does not add up"
            seed = piece.seed
            seed_end = (seed.end_commit, seed.last_crc) if seed is not None else None
            if seed_end is not None and size == length and seed_end != (last_commit, last_crc):
                return f"{piece.name} does not end where it did"
        seed_length = log.manifest.seed_length
        if key["seedLength"] != seed_length and key["seq"] > seed_length:
            return "its usage totals count another part of the history"
        if zlib.crc32(memoryview(log.data)[:covered]) != key["crc"]:
            return "the history it covers has changed"
    except (KeyError, TypeError, ValueError):
        return "its key is not readable"
    return None


def resuming(
    used: list[Resumed], *, whole: bool = True, for_writer: bool = False
) -> Callable[[SessionLog], ResumePoint | None]:
    """A ``resume_from`` for :func:`~branchwise.core.log.segments.scan_session_log`.

    Reads the session's snapshot once the log's bytes are read, and resumes
    after it when :func:`unusable_because` finds nothing wrong; the snapshot
    used is appended to ``used``. ``for_writer``: a snapshot that ends inside
    the active segment is used only if that segment's sidecars still start
    with what it covers (the writer keeps them exact).
    """

    def resume_from(log: SessionLog) -> ResumePoint | None:
        path = snapshot_path(log)
        snapshot = read_snapshot(path, whole=whole) if path is not None else None
        if snapshot is None or unusable_because(snapshot, log) is not None:
            return None
        try:
            point = snapshot.resume_point()
            base = snapshot.sidecar_base(log) if for_writer else None
            ends_in_active = log.active is not None and len(snapshot.key["pieces"]) == len(
                log.pieces
            )
            if for_writer and ends_in_active and base is None:
                return None
            # Restored here, so a state that does not restore (a buggy writer's)
            # means a full replay, like any other unusable snapshot.
            restored = (
                snapshot.projection(log.manifest.seed_length) if whole else snapshot.tracker_state()
            )
        except (KeyError, TypeError, ValueError):  # StateMismatch is a ValueError
            return None
        used.append(Resumed(snapshot, base, restored))
        return point

    return resume_from


def snapshot_note(log: SessionLog) -> dict[str, Any] | None:
    """What ``session verify`` says about a session's snapshot (``None``: none, or usable).

    An unusable snapshot is a cache note, never damage: the next writer open
    replays the log and writes a new one.
    """
    path = snapshot_path(log)
    if path is None or not os.path.lexists(path):
        return None
    snapshot = read_snapshot(path)
    reason = "it is damaged, cut short or of another version"
    if snapshot is not None:
        found = unusable_because(snapshot, log)
        if found is None:
            return None
        reason = found
    name = os.path.relpath(path, log.pieces[0].path.parent.parent)
    return {
        "code": "snapshot_unused",
        "message": f"the projection snapshot {name} is not used: {reason}; it is a cache, "
        "rebuilt when the session is next opened for writing (nothing is lost)",
        "file": name,
        "cache": True,
    }


# -- writing ---------------------------------------------------------------------------


def snapshot_key(
    log: SessionLog, previous: Snapshot | None, seed_length: int
) -> dict[str, Any] | None:
    """The key of a snapshot of ``log`` as scanned (through ``scan.end``), or ``None`` if empty.

    ``previous`` is the snapshot the scan resumed after (it knows the files
    it covered; the frames after it are in ``log.scan``).
    """
    scan = log.scan
    covered = scan.end
    if covered == 0 or scan.corruption is not None:
        return None
    frames = scan.frames
    data = log.data
    old = previous.key["pieces"] if previous is not None else []
    old_end = previous.end if previous is not None else 0
    pieces: list[list[int]] = []
    for index, piece in enumerate(log.pieces):
        start = log.starts[index]
        if start >= covered:
            break
        end = min(log.starts[index + 1] if index + 1 < len(log.pieces) else len(data), covered)
        if end <= old_end and index < len(old):
            pieces.append(list(old[index]))
            continue
        at = bisect.bisect_left(frames, end, key=_frame_end)
        if at >= len(frames) or frames[at].end != end:
            return None  # not a frame end: nothing this scan vouches for
        crc = frame_crc(data, frames[at].offset)
        pieces.append([end - start, piece.first_commit, piece.first_seq, frames[at].commit, crc])
    if frames:
        last = frames[-1]
        frame = [last.offset, frame_crc(data, last.offset)]
    elif previous is not None:
        frame = list(previous.key["frame"])
    else:
        return None
    return {
        "schema": schema(),
        "bytes": covered,
        "crc": zlib.crc32(memoryview(data)[:covered]),
        "commit": scan.last_commit,
        "seq": scan.last_seq,
        "frame": frame,
        "pieces": pieces,
        "seedLength": seed_length,
    }


def _frame_end(frame: Frame) -> int:
    return frame.end


def snapshot_bytes(
    key: dict[str, Any],
    state: ProjectionState,
    entries: list[tuple[CommitEntries, int]] | None,
    sidecar_base: Mapping[str, bytes] | None,
    entries_piece: int,
    sidecar_files: Mapping[str, bytes] | None = None,
) -> bytes:
    """The whole snapshot file for a key, a captured state and the active segment's sidecars.

    ``entries`` (after ``sidecar_base``) are the sidecar entries of piece
    ``entries_piece`` when it is the writer's active segment: the snapshot
    keeps the length and CRC32 of those sidecar bytes, so a writer resuming
    after it checks its files instead of replaying the segment.
    ``sidecar_files``: those bytes themselves, read from the files a closed
    writer left (instead of ``entries``).
    """
    sidecars = None
    files: Mapping[str, bytes] | None = sidecar_files
    if entries is not None:
        files = sidecar_bytes(entries, sidecar_base)
    if files is not None:
        sidecars = {
            "piece": entries_piece,
            "files": {suffix: [len(data), zlib.crc32(data)] for suffix, data in files.items()},
        }
    rest = {"messages": state.messages, "extra": state.extra, "sidecars": sidecars}
    out = bytearray(_START.pack(_MAGIC, SNAPSHOT_FORMAT))
    for payload in (
        orjson.dumps(key),
        orjson.dumps(state.tracker.to_json()),
        orjson.dumps(rest),
        state.text.encode("utf-8"),
    ):
        out += _SECTION.pack(len(payload), zlib.crc32(payload))
        out += payload
    return bytes(out)


_pending: list[threading.Thread] = []
_pending_lock = threading.Lock()
_scheduled: dict[str, int] = {}
"""The history each snapshot path was last scheduled to cover (a write may still be running)."""


def _note_scheduled(path: Path, end: int) -> None:
    with _pending_lock:
        if len(_scheduled) >= 1024:
            _scheduled.clear()
        _scheduled[str(path)] = end


def _scheduled_end(path: Path) -> int:
    with _pending_lock:
        return _scheduled.get(str(path), 0)


def schedule_snapshot(
    log: SessionLog,
    projection: Projection,
    previous: Resumed | None,
    entries: list[tuple[CommitEntries, int]] | None,
) -> bool:
    """Write a snapshot of ``projection`` (as of ``log.scan.end``) on a background thread.

    The state is captured here, synchronously (a copy of rows, a few
    milliseconds per ten thousand turns); encoding and writing happen on the
    thread. ``entries`` are the active segment's sidecar entries after
    ``previous``'s (a writer open's). Returns whether a write was started.
    """
    path = snapshot_path(log)
    before = previous.snapshot if previous is not None else None
    key = snapshot_key(log, before, projection.seed_length) if path is not None else None
    if path is None or key is None:
        return False
    _note_scheduled(path, int(key["bytes"]))
    state = capture(projection)
    last = len(key["pieces"]) - 1
    base = previous.sidecar_base if previous is not None else None
    if log.active is None or last != len(log.pieces) - 1 or entries is None:
        entries = None
    else:
        entries = list(entries)

    def work() -> None:
        with contextlib.suppress(OSError, TypeError, ValueError):
            write_cache_file(path, snapshot_bytes(key, state, entries, base, last))

    thread = threading.Thread(target=work, name="projection-snapshot", daemon=False)
    with _pending_lock:
        _pending[:] = [t for t in _pending if t.is_alive()]
        _pending.append(thread)
    thread.start()
    return True


def covered_bytes(log_dir: Path) -> int:
    """How many bytes of history the snapshot in ``log_dir`` says it covers (0: none).

    Reads the key alone; whether the snapshot is usable is decided when it is read.
    """
    key = _read_key(log_dir / SNAPSHOT_FILE)
    if key is None or key.get("schema") != schema():
        return 0  # none, or one no reader would use
    try:
        return int(key["bytes"])
    except (KeyError, TypeError, ValueError):
        return 0


def _log_bytes(directory: Path, layout: LogLayout) -> int:
    """The length of a session's virtual log, from the files' sizes (nothing is read)."""
    total = 0
    for piece in log_pieces(directory, layout):
        total += piece.seed.end if piece.seed is not None else os.lstat(piece.path).st_size
    return total


def schedule_close_snapshot(
    directory: Path, layout: LogLayout, projection: Projection, min_bytes: int
) -> bool:
    """At a writer's close, write a snapshot of its projection if the log outgrew the last one.

    A session a writer wrote itself (from empty, turn by turn) had no replay
    big enough to leave a snapshot at open, so its first cold read after the
    close replayed everything (2.9x reading and decoding its payloads, at
    20,000 turns). When at least ``min_bytes`` of the log are not covered,
    the projection is captured here (a few milliseconds per ten thousand
    turns); reading the log for the key and writing happen on a background
    thread, off every commit's path and after the lease is released. The
    thread writes nothing unless the log it reads ends exactly where the
    projection does (a writer that opened since has moved on). A close
    writes one only for a big session: ``min_bytes`` or
    :data:`SNAPSHOT_MIN_BYTES`, whichever is more, so a store whose every
    open snapshots (tests) does not also write one at every close. Returns
    whether a write was started.
    """
    if not layout.segmented:
        return False
    log_dir = directory / layout.log_dir
    size = _log_bytes(directory, layout)
    covered = max(covered_bytes(log_dir), _scheduled_end(log_dir / SNAPSHOT_FILE))
    if size - covered < max(min_bytes, SNAPSHOT_MIN_BYTES):
        return False  # a small session: its replay costs less than a snapshot
    _note_scheduled(log_dir / SNAPSHOT_FILE, size)
    state = capture(projection)
    last_seq, seed_length = projection.last_seq, projection.seed_length
    # Read now, under the lease: as the close synced them, before another writer adds to them.
    active = _active_sidecars(directory, layout)

    def work() -> None:
        with contextlib.suppress(OSError, TypeError, ValueError, KeyError, BranchwiseError):
            used: list[Resumed] = []
            log = scan_session_log(directory, layout, resuming(used, whole=False))
            path = snapshot_path(log)
            if path is None or log.scan.corruption is not None or log.scan.last_seq != last_seq:
                return
            previous = used[0].snapshot if used else None
            key = snapshot_key(log, previous, seed_length)
            if key is None:
                return
            last = len(key["pieces"]) - 1
            sidecars = None
            if active is not None and log.active is not None and last == len(log.pieces) - 1:
                sidecars = active[1] if active[0] == log.active.path else None
            write_cache_file(path, snapshot_bytes(key, state, None, None, last, sidecars))

    thread = threading.Thread(target=work, name="projection-snapshot-at-close", daemon=False)
    with _pending_lock:
        _pending[:] = [t for t in _pending if t.is_alive()]
        _pending.append(thread)
    thread.start()
    return True


def _active_sidecars(directory: Path, layout: LogLayout) -> tuple[Path, dict[str, bytes]] | None:
    """The active segment and its sidecar files as a closing writer left them (exact, synced)."""
    pieces = log_pieces(directory, layout)
    if not pieces or pieces[-1].seed is not None:
        return None
    segment = pieces[-1].path
    files = {}
    for suffix in SIDECAR_SUFFIXES:
        try:
            files[suffix] = segment.with_suffix(suffix).read_bytes()
        except OSError:
            return None
    return segment, files


def wait_for_snapshots(timeout: float | None = None) -> None:
    """Until every snapshot write started so far has finished (tests, benchmarks, shutdown)."""
    with _pending_lock:
        threads = list(_pending)
    for thread in threads:
        thread.join(timeout)
