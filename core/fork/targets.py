"""Fork targets: which turns of a session can be branched, answered from the log.

The answer's shape is in docs/cli.md, "session targets".

The answer is computed from whole committed frames only, never from a
writer's memory or its lease, so a live session, a session whose writer is
another process and a cold closed one all give the same answer.

Frames are read by :func:`~branchwise.core.log.frames.iter_frames` and
replayed into a bare :class:`~branchwise.core.projection.turns.TurnTracker`,
the one set of turn rules (no message objects); the live projection and the
fork engine apply the same rules, so a fork accepts exactly the turns this
query lists as available. A caller that asks repeatedly (``branchwise
serve``) owns a :class:`TargetsCache`, so each query replays only the frames
committed since the last one.
"""

from __future__ import annotations

import contextlib
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from itertools import repeat
from pathlib import Path
from typing import Any

from branchwise.core.errors import CorruptLog, SessionNotFound, SourceNotFound, StaleSource
from branchwise.core.log.frames import iter_frames
from branchwise.core.log.range_check import check_linked_range
from branchwise.core.log.scan import scan_bytes
from branchwise.core.log.segments import (
    SessionLog,
    log_identity,
    log_pieces,
    read_frame,
    read_piece,
    read_session_log,
    scan_read_log,
)
from branchwise.core.log.sidecars import (
    AUTHORITY_OPEN,
    CLOSES_TURN,
    CLOSING_COMMIT_SPILLS,
    TurnRow,
    find_record,
)
from branchwise.core.log.turn_table import turn_columns
from branchwise.core.projection.projection import Projection
from branchwise.core.projection.snapshot_cache import Resumed, resuming
from branchwise.core.projection.turns import Turn, TurnTracker
from branchwise.core.store.manifest import Manifest, load_manifest
from branchwise.core.store.store import SessionStore

# A log replaced while it is being read makes us read again; this bounds the retries.
_STABLE_READ_ATTEMPTS = 5


# -- values -------------------------------------------------------------------


class TargetReason(StrEnum):
    """Why a turn cannot be forked (the ``reason`` of an unavailable target)."""

    TURN_OPEN = "turn_open"
    ACTIVE_AUTHORITY = "active_authority"
    BOUNDARY_NOT_ATOMIC = "boundary_not_atomic"
    UNVERIFIABLE = "unverifiable"


@dataclass(frozen=True, slots=True)
class ForkTarget:
    """One turn as a fork target.

    Attributes:
        turn_id: the turn.
        message_id: its final assistant message (the UI binds the action to it).
        boundary_sequence: last seq of the commit that closed it (``None`` while open).
        available: whether a fork at this turn would be accepted now.
        reason: why not, when ``available`` is false (a :class:`TargetReason`).
    """

    turn_id: str
    message_id: str | None
    boundary_sequence: int | None
    available: bool
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        """The camelCase form ``session targets`` prints and serve answers."""
        return {
            "turnId": self.turn_id,
            "messageId": self.message_id,
            "boundarySequence": self.boundary_sequence,
            "available": self.available,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class ForkTargetSet:
    """Every fork target of one session at one generation.

    Attributes:
        session_id: the source session.
        generation: the source's generation the answer was computed at.
        verifiable: false for message-only history (then ``targets`` is empty).
        targets: one per turn, in order.
    """

    session_id: str
    generation: int
    verifiable: bool
    targets: tuple[ForkTarget, ...]

    def target(self, turn_id: str) -> ForkTarget | None:
        """The target of this turn, if the session has such a turn."""
        for target in self.targets:
            if target.turn_id == turn_id:
                return target
        return None

    def to_json(self) -> dict[str, Any]:
        """The fork-targets answer (docs/cli.md, "session targets")."""
        return {
            "source": {"sessionId": self.session_id, "generation": self.generation},
            "verifiable": self.verifiable,
            "targets": [target.to_json() for target in self.targets],
        }


def target_of(turn: Turn) -> ForkTarget:
    """The fork target a turn gives: available, or unavailable with its reason."""
    reason: str | None = None
    if turn.is_open:
        reason = TargetReason.TURN_OPEN.value
    elif turn.closing_commit_spills:
        reason = TargetReason.BOUNDARY_NOT_ATOMIC.value
    elif turn.open_authority:
        reason = TargetReason.ACTIVE_AUTHORITY.value
    return ForkTarget(
        turn_id=turn.turn_id,
        message_id=turn.message_id,
        boundary_sequence=turn.boundary_sequence,
        available=reason is None,
        reason=reason,
    )


def target_set(
    session_id: str, generation: int, turns: Iterable[Turn], verifiable: bool
) -> ForkTargetSet:
    """Assemble the answer; unverifiable history lists no targets at all."""
    targets = tuple(target_of(turn) for turn in turns) if verifiable else ()
    return ForkTargetSet(session_id, generation, verifiable, targets)


def targets_from_projection(projection: Projection, manifest: Manifest) -> ForkTargetSet:
    """Fork targets of an already built projection (e.g. a writer's live one)."""
    return target_set(
        manifest.session_id, manifest.generation, projection.turns, projection.verifiable
    )


def tracker_after_snapshot(log: SessionLog) -> TurnTracker | None:
    """The turn state of a log already read, from its projection snapshot's turn state.

    Only the snapshot's key and turn rules' part are read (not the
    transcript), the covered bytes are checksummed, and only the frames after
    them are decoded, into a bare tracker: what a big conversation's branch
    buttons (and where its preview starts) need before its full projection
    is loaded. ``None`` when the snapshot cannot stand for the history (none,
    stale, damaged) or the log after it is damaged: the full read then answers.
    """
    used: list[Resumed] = []
    scanned = scan_read_log(log, resuming(used, whole=False))
    if not used or scanned.scan.corruption is not None:
        return None
    tracker = used[0].restored
    try:
        for frame in scanned.scan.frames:
            tracker.apply(frame.events)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None  # an event this build cannot read: the full read says so
    return tracker


def load_source_manifest(directory: Path, session_id: str) -> Manifest:
    """A source's manifest; a missing session is ``source_not_found``."""
    try:
        return load_manifest(directory)
    except SessionNotFound as exc:
        raise SourceNotFound(f"no session {session_id} to fork", sessionId=session_id) from exc


class LogReplay:
    """How far one log has been replayed into a tracker: an in-memory, rebuildable state.

    A log only grows within a generation, so a repeated targets query (the
    desktop asks after every turn) replays only the frames added since. The
    state is used only for the same file (device and inode), the same
    generation, and the very bytes replayed before (checksummed: re-reading
    and checksumming the log costs a fraction of decoding it); so a cached
    answer is always exactly what a full replay would give.

    ``plans`` is where the fork engine keeps what it worked out from these
    bytes (a cut's seeds, keyed by turn and boundary): it depends only on the
    replayed prefix, so it is forgotten exactly when the replay is.

    ``reads`` counts the reads of the log begun under :attr:`lock`;
    ``verified`` is the number of the one the state now describes (0: none
    since the last restart) and ``layout`` that read's pieces and where each
    starts. A caller that arrived when ``reads`` was ``n`` may take the state
    as it is if ``verified > n``: that read began after it arrived, so it saw
    the log as the caller's own read would have (see
    :meth:`TargetsCache.replayed`).
    """

    def __init__(self, identity: tuple[int, int], generation: int) -> None:
        self.lock = threading.Lock()
        self.reads = 0
        self.restart(identity, generation)

    def restart(self, identity: tuple[int, int], generation: int) -> None:
        """Forget everything replayed: the next :meth:`advance` starts at byte 0."""
        self.identity = identity
        self.generation = generation
        self.tracker = TurnTracker()
        self.end = 0
        self.checksum = zlib.crc32(b"")
        self.commit = self.seq = 1
        self.plans: dict[tuple[str, int], object] = {}
        self.answer: ForkTargetSet | None = None  # the targets at ``answer_end``
        self.answer_end = -1
        self.verified = 0
        self.layout: tuple[tuple[str, int], ...] = ()

    def still_describes(self, data: memoryview, identity: tuple[int, int], generation: int) -> bool:
        """Whether ``data`` (a whole log) starts with exactly the bytes replayed so far."""
        return (
            (identity, generation) == (self.identity, self.generation)
            and len(data) >= self.end
            and zlib.crc32(data[: self.end]) == self.checksum
        )

    def advance(self, data: memoryview) -> None:
        """Replay the whole frames of ``data`` (the whole log) past ``self.end``."""
        base, apply, end = self.end, self.tracker.apply, self.end
        try:
            for frame in iter_frames(
                data, start=base, first_commit=self.commit, first_seq=self.seq
            ):
                events = frame.events
                apply(events)
                self.commit += 1
                self.seq += len(events)
                end = frame.end
        except BaseException:
            self.restart(self.identity, self.generation)  # never keep a half-replayed state
            raise
        self.checksum = zlib.crc32(data[base:end], self.checksum)
        self.end = end


class TargetsCache:
    """Replays of recently queried logs, kept by a caller that asks again and again.

    ``branchwise serve`` owns one for its lifetime; a one-off query (the CLI)
    needs none. Thread-safe: queries of different logs run in parallel, those
    of one log take turns.

    Args:
        max_logs: how many logs' replays to keep (least recently asked go first).
    """

    def __init__(self, max_logs: int = 16) -> None:
        self._replays: OrderedDict[str, LogReplay] = OrderedDict()
        self._lock = threading.Lock()
        self._max_logs = max_logs

    def replay_of(self, path: Path, identity: tuple[int, int], generation: int) -> LogReplay:
        """The replay kept for ``path``, or a new one if it describes another file or generation."""
        key = str(path)
        with self._lock:
            replay = self._replays.get(key)
            if replay is None or (replay.identity, replay.generation) != (identity, generation):
                replay = self._replays[key] = LogReplay(identity, generation)
            self._replays.move_to_end(key)
            while len(self._replays) > self._max_logs:
                self._replays.popitem(last=False)
        return replay

    @contextlib.contextmanager
    def replayed(
        self, directory: Path, manifest: Manifest, *, with_log: bool = False
    ) -> Iterator[tuple[LogReplay, SessionLog | None]]:
        """The session's replay brought up to its log as read after this call began.

        The replay's lock is held until the block ends, so its tracker,
        ``layout`` and ``plans`` describe that read for the whole block;
        queries and forks of other logs go on in parallel.

        Callers of one log share reads: one that waited for the lock while
        another read the log (a burst of forks of one conversation) takes the
        state that read left, since the read began after it arrived; the log
        is then not yielded (``None``). ``with_log`` always reads (and
        yields) the log itself.
        """
        generation = manifest.generation
        device, inode, _ = log_identity(directory, manifest)
        replay = self.replay_of(directory, (device, inode), generation)
        arrived = replay.reads
        with replay.lock:
            if not with_log and replay.verified > arrived:
                yield replay, None
                return
            replay.reads += 1
            number = replay.reads
            log = read_session_log(directory, manifest)
            read_device, read_inode, _ = log_identity(directory, log.manifest)
            if (read_device, read_inode) == replay.identity:
                self._bring_up(replay, log, number)
                yield replay, log
                return
        # The log's first file changed while it was read (a migration): that file's replay.
        replay = self.replay_of(directory, (read_device, read_inode), generation)
        with replay.lock:
            replay.reads += 1
            self._bring_up(replay, log, 0)  # an earlier read than the last one: shared with none
            yield replay, log

    @staticmethod
    def _bring_up(replay: LogReplay, log: SessionLog, number: int) -> None:
        """Replay ``log`` (read as read number ``number``) into ``replay``, restarting if needed."""
        data = memoryview(log.data)
        if not replay.still_describes(data, replay.identity, replay.generation):
            replay.restart(replay.identity, replay.generation)
        replay.verified = 0  # while it changes
        replay.advance(data)
        replay.layout = tuple(
            (str(piece.path), start) for piece, start in zip(log.pieces, log.starts, strict=True)
        )
        replay.verified = number


def _log_targets(directory: Path, manifest: Manifest, cache: TargetsCache | None) -> ForkTargetSet:
    """Targets of a session's (virtual) log, replaying only what ``cache`` has not seen."""
    session_id, generation = manifest.session_id, manifest.generation
    if cache is None:
        data = memoryview(read_session_log(directory, manifest).data)
        tracker = TurnTracker.replay(frame.events for frame in iter_frames(data))
        return target_set(session_id, generation, tracker.turns, tracker.verifiable)
    with cache.replayed(directory, manifest) as (replay, _log):
        # The turn state is a function of the bytes replayed: a burst of queries shares one answer.
        if replay.answer is None or replay.answer_end != replay.end:
            tracker = replay.tracker
            replay.answer = target_set(session_id, generation, tracker.turns, tracker.verifiable)
            replay.answer_end = replay.end
        return replay.answer


def _indexed_target(turn_id: str, message_id: str | None, last_seq: int, flags: int) -> ForkTarget:
    """The target of a turn as its ``.tix`` record describes it."""
    reason = None
    if flags & CLOSING_COMMIT_SPILLS:
        reason = TargetReason.BOUNDARY_NOT_ATOMIC.value
    elif flags & AUTHORITY_OPEN:
        reason = TargetReason.ACTIVE_AUTHORITY.value
    return ForkTarget(turn_id, message_id, last_seq, reason is None, reason)


def _indexed_targets(directory: Path, manifest: Manifest) -> ForkTargetSet | None:
    """Targets from the turn records of every segment, one ``.idx`` record and the frames after it.

    ``None`` when the sidecars cannot vouch (missing, old, damaged, a turn
    that never closed, a record whose frame does not match, open authority
    at the last closed turn); the caller then replays. The turn records come
    from the turn table (:mod:`~branchwise.core.log.turn_table`) where its
    key holds, else from each segment's binary ``.tix`` (no JSON either way);
    then the last one's ``.idx`` is binary-searched for the closing frame,
    that frame is read and checked, and only the frames after it replayed.
    """
    pieces = log_pieces(directory, manifest)
    columns = turn_columns(pieces)
    if columns is None or columns.last_piece < 0:
        return None
    ids, message_ids, last_seqs = columns.turn_ids, columns.message_ids, columns.last_seqs
    targets: list[ForkTarget]
    # Column by column (C loops): 80,000 turns cost what building their targets costs.
    if set(columns.flags) == {CLOSES_TURN}:
        targets = list(map(ForkTarget, ids, message_ids, last_seqs, repeat(True), repeat(None)))
    else:
        targets = list(map(_indexed_target, ids, message_ids, last_seqs, columns.flags))
    piece_number = columns.last_piece
    row = TurnRow(
        ids[-1], message_ids[-1], last_seqs[-1], columns.commits[-1], 0, len(ids), columns.flags[-1]
    )
    if row.flags & AUTHORITY_OPEN:
        return None  # the trailing turns' authority depends on state before the tail
    found = find_record(pieces[piece_number].path, row.last_seq)
    if found is None or found[0].commit != row.commit:
        return None
    record = found[0]
    read = read_frame(pieces[piece_number].path, record.offset, record.end)
    if read is None or read[1] != record.frame_crc or read[0].commit != record.commit:
        return None
    frame = read[0]
    spills = bool(row.flags & CLOSING_COMMIT_SPILLS)
    start = record.offset if spills else record.end
    tail = [read_piece(pieces[piece_number], start)]
    tail.extend(read_piece(piece) for piece in pieces[piece_number + 1 :])
    tracker = TurnTracker()
    first_seq = int(frame.events[0]["seq"]) if spills else record.last_seq + 1
    for later in iter_frames(
        b"".join(tail),
        first_commit=record.commit if spills else record.commit + 1,
        first_seq=first_seq,
    ):
        tracker.apply(later.events)
    seen = set(ids) if tracker.turns else set()
    for turn in tracker.turns:
        if turn.turn_id in seen:
            return None
        targets.append(target_of(turn))
    return ForkTargetSet(manifest.session_id, manifest.generation, True, tuple(targets))


def check_log_whole(directory: Path, manifest: Manifest) -> None:
    """Refuse ``corrupt_log`` when any byte the targets stand on is damaged.

    Targets come from turn records, not from the frames, so the frames are
    checked by checksum (once per file and size, see
    :mod:`~branchwise.core.log.range_check`): every seed up to its bound and
    every sealed segment whole. In the active segment only damage followed
    by good commits is corruption (as for a scan); a torn tail is not.

    Raises:
        CorruptLog: damage, naming the file and byte.
    """
    pieces = log_pieces(directory, manifest)
    for number, piece in enumerate(pieces):
        if piece.seed is not None:
            check_linked_range(piece.path, piece.seed.end, piece.name)
            continue
        try:
            size = piece.path.lstat().st_size
        except OSError as exc:
            raise CorruptLog(f"{piece.name} is missing", file=piece.name, offset=0) from exc
        try:
            check_linked_range(piece.path, size, piece.name)
        except CorruptLog:
            if number != len(pieces) - 1:
                raise
            scan = scan_bytes(read_piece(piece), 0, piece.first_commit, piece.first_seq)
            if scan.corruption is not None:
                details = {**scan.corruption.details, "file": piece.name}
                raise CorruptLog(f"{piece.name}: {scan.corruption.message}", **details) from None


def fork_targets(
    store: SessionStore, session_id: str, *, cache: TargetsCache | None = None
) -> ForkTargetSet:
    """Every turn of a session as a fork target, from committed frames only.

    Takes no lease and writes nothing. The manifest is read before and after
    the log: if a log replacement (a generation bump) raced the read, the
    read is repeated, so the answer's generation always describes its turns.
    With a ``cache``, repeated queries replay only frames committed since
    the last one (see :class:`TargetsCache`).

    Raises:
        SourceNotFound: no such session.
        StaleSource: the log kept being replaced while it was read.
        CorruptLog: the log is damaged (see :func:`check_log_whole`).
    """
    directory = store.session_dir(session_id)
    for _ in range(_STABLE_READ_ATTEMPTS):
        before = load_source_manifest(directory, session_id)
        try:
            check_log_whole(directory, before)
        except CorruptLog:
            if load_source_manifest(directory, session_id).generation == before.generation:
                raise
            continue  # the log was replaced while it was checked: check the new one
        indexed = _indexed_targets(directory, before) if cache is None else None
        answer = indexed if indexed is not None else _log_targets(directory, before, cache)
        after = load_source_manifest(directory, session_id)
        if after.generation == before.generation:
            return answer
    raise StaleSource(
        f"session {session_id} kept changing generation while it was read",
        sessionId=session_id,
    )
