"""Fork targets: which turns of a session can be branched, answered from the log (§3.1).

The answer is computed from whole committed frames only, never from a
writer's memory or its lease, so a live session, a session whose writer is
another process and a cold closed one all give the same answer.

A full :class:`~branchwise.core.projection.Projection` creates an object per
message; fork targets need only the turn bookkeeping, so :class:`TurnTracker`
replays just that, by the same rules as the projection (a property test keeps
the two in step). The fork engine feeds the same tracker while it copies, so
a fork accepts exactly the turns this query lists as available.

The typed refusals (and the reasons they share with targets) live in
:mod:`~branchwise.core.fork_errors`.
"""

from __future__ import annotations

import os
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

from .errors import SessionNotFound, UnsupportedFormat
from .events import EventType
from .fork_errors import SourceNotFound, StaleSource, TargetReason
from .frames import FRAME_VERSION, HEADER, HEADER_SIZE, MAGIC, MAX_PAYLOAD
from .manifest import Manifest, load_manifest
from .projection import Projection, Turn, seal_commit
from .store import SessionStore

# The event types the turn bookkeeping reads, as small codes: one dict lookup per
# event skips everything else (steps, usage, checkpoints) in the hot loop.
(
    _C_TURN_START,
    _C_TURN_END,
    _C_USER,
    _C_ASSISTANT,
    _C_TOOL_CALL,
    _C_TOOL_RESULT,
    _C_REQUEST,
    _C_RESOLVE,
    _C_LEGACY,
) = range(9)
_CODES: dict[str, int] = {
    EventType.TURN_START.value: _C_TURN_START,
    EventType.TURN_END.value: _C_TURN_END,
    EventType.MESSAGE_USER.value: _C_USER,
    EventType.MESSAGE_ASSISTANT.value: _C_ASSISTANT,
    EventType.TOOL_CALL.value: _C_TOOL_CALL,
    EventType.TOOL_RESULT.value: _C_TOOL_RESULT,
    EventType.INTERACTION_REQUEST.value: _C_REQUEST,
    EventType.INTERACTION_RESOLVE.value: _C_RESOLVE,
    EventType.LEGACY_IMPORT.value: _C_LEGACY,
}
_SEQ = itemgetter("seq")

# A log replaced while it is being read makes us read again; this bounds the retries.
_STABLE_READ_ATTEMPTS = 5


# -- values -------------------------------------------------------------------


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
        """The §3.1 camelCase form."""
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
        """The §3.1 answer."""
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


# -- the turn-only replay -----------------------------------------------------


class TurnTracker:
    """The turn bookkeeping of :class:`Projection`, without messages.

    Feed it whole commits in order with :meth:`apply`. ``turns`` holds the
    same :class:`Turn` records (boundary, end reason, open authority, spill)
    a projection of the same commits would hold.
    """

    __slots__ = (
        "turns",
        "open_interactions",
        "open_tool_calls",
        "legacy_messages",
        "last_seq",
        "commits",
        "_by_turn",
    )

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.open_interactions: dict[str, Any] = {}
        self.open_tool_calls: dict[str, Any] = {}
        self.legacy_messages = 0
        self.last_seq = 0
        self.commits = 0
        self._by_turn: dict[str, Turn] = {}

    @property
    def verifiable(self) -> bool:
        """False for message-only history: messages but no turn records."""
        return not (self.legacy_messages and not self.turns)

    def turn(self, turn_id: str) -> Turn | None:
        """The turn with this id (the latest one if a log repeats an id)."""
        return self._by_turn.get(turn_id)

    def apply(self, events: list[dict[str, Any]]) -> None:
        """Apply one whole commit."""
        turns = self.turns
        trailing: Turn | None = turns[-1] if turns and turns[-1].end_reason is None else None
        closed: list[Turn] = []
        code_of = _CODES.get
        for event in events:
            code = code_of(event["type"])
            if code is None:
                continue
            if code == _C_ASSISTANT:
                if trailing is not None:
                    trailing.message_id = event["messageId"]
            elif code == _C_TURN_START:
                trailing = Turn(event["turnId"], len(turns) + 1, event["seq"])
                turns.append(trailing)
                self._by_turn[trailing.turn_id] = trailing
                for turn in closed:
                    turn.closing_commit_spills = True
            elif code == _C_TURN_END:
                ended = self._by_turn.get(event["turnId"])
                if ended is not None:
                    if ended.end_reason is None:
                        ended.end_reason = event["reason"]
                        ended.error = event.get("error")
                    closed.append(ended)
                    if ended is trailing:
                        trailing = None
            elif code == _C_USER:
                if trailing is not None and trailing.user_message_id is None:
                    trailing.user_message_id = event["messageId"]
            elif code == _C_TOOL_CALL:
                self.open_tool_calls[event["callId"]] = event["name"]
            elif code == _C_TOOL_RESULT:
                self.open_tool_calls.pop(event["callId"], None)
            elif code == _C_REQUEST:
                self.open_interactions[event["interactionId"]] = event["kind"]
            elif code == _C_RESOLVE:
                self.open_interactions.pop(event["interactionId"], None)
            else:
                self.legacy_messages += len(event["messages"])
        self.last_seq = seal_commit(self, events, closed)


# -- reading committed frames -------------------------------------------------


def iter_commits(buf: bytes | memoryview) -> Iterator[list[dict[str, Any]]]:
    """The events of every whole, verified commit of a log buffer, in order (see below)."""
    for events, _, _ in iter_frames(buf):
        yield events


def iter_frames(
    buf: bytes | memoryview, first_commit: int = 1, first_seq: int = 1
) -> Iterator[tuple[list[dict[str, Any]], int, int]]:
    """Every whole, verified commit of a log buffer: ``(events, offset, end)``, in order.

    ``first_commit``/``first_seq`` are what the buffer's first frame must
    carry (a buffer holding the tail of a log starts past 1).

    Stops silently at the first frame that is incomplete, damaged, or out of
    commit/seq sequence: whatever follows is a torn tail or corruption, and
    neither is committed history. A newer frame version raises
    ``UnsupportedFormat`` (like every other reader).

    This is :func:`~branchwise.core.frames.decode_frame` plus the sequence
    checks of :func:`~branchwise.core.log.scan_bytes`, inlined: on a long log
    the per-frame overhead of the general decoder is a large share of a fork
    or a targets query. A test pins the two to the same verdicts.
    """
    view = memoryview(buf)
    offset, commit, seq, size = 0, first_commit, first_seq, len(view)
    unpack, crc32, loads = HEADER.unpack_from, zlib.crc32, orjson.loads
    while size - offset >= HEADER_SIZE:
        magic, version, length, crc, hcrc = unpack(view, offset)
        if magic != MAGIC or crc32(view[offset : offset + 12]) != hcrc:
            return
        if version > FRAME_VERSION:
            raise UnsupportedFormat(
                f"frame version {version} is newer than supported {FRAME_VERSION}",
                offset=offset,
            )
        start = offset + HEADER_SIZE
        end = start + length
        if version < 1 or length > MAX_PAYLOAD or end > size:
            return
        payload = view[start:end]
        if crc32(payload) != crc:
            return
        try:
            body = loads(payload)
            number, events = body["commit"], body["events"]
            if number != commit or not isinstance(number, int) or type(events) is not list:
                return
            count = len(events)
            if count and list(map(_SEQ, events)) != list(range(seq, seq + count)):
                return
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return
        yield events, offset, end
        offset, commit, seq = end, commit + 1, seq + count


def read_log_bytes(path: Path) -> bytes:
    """The whole log file (a missing log is an empty one)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def load_source_manifest(directory: Path, session_id: str) -> Manifest:
    """A source's manifest; a missing session is ``source_not_found``."""
    try:
        return load_manifest(directory)
    except SessionNotFound as exc:
        raise SourceNotFound(f"no session {session_id} to fork", sessionId=session_id) from exc


class _TurnScan:
    """How far one log has been replayed into a tracker: an in-memory, rebuildable cache.

    A log only grows within a generation, so a repeated targets query (the
    desktop asks after every turn) replays only the frames added since. The
    cached state is used only for the same file (device and inode), the same
    generation, and the very bytes replayed before (checksummed: re-reading
    and checksumming the log costs a fraction of decoding it); so a cached
    answer is always exactly what a full replay would give.
    """

    def __init__(self, identity: tuple[int, int], generation: int) -> None:
        self.lock = threading.Lock()
        self.restart(identity, generation)

    def restart(self, identity: tuple[int, int], generation: int) -> None:
        """Forget everything replayed: the next :meth:`advance` starts at byte 0."""
        self.identity = identity
        self.generation = generation
        self.tracker = TurnTracker()
        self.end = 0
        self.checksum = zlib.crc32(b"")
        self.commit = self.seq = 1

    def still_describes(self, data: memoryview, identity: tuple[int, int], generation: int) -> bool:
        """Whether ``data`` (a whole log) starts with exactly the bytes replayed so far."""
        return (
            (identity, generation) == (self.identity, self.generation)
            and len(data) >= self.end
            and zlib.crc32(data[: self.end]) == self.checksum
        )

    def advance(self, data: memoryview) -> None:
        """Replay the whole frames of ``data`` (the whole log) past ``self.end``."""
        base, apply, replayed = self.end, self.tracker.apply, 0
        try:
            for events, _, end in iter_frames(data[base:], self.commit, self.seq):
                apply(events)
                self.commit += 1
                self.seq += len(events)
                replayed = end
        except BaseException:
            self.restart(self.identity, self.generation)  # never keep a half-replayed state
            raise
        self.checksum = zlib.crc32(data[base : base + replayed], self.checksum)
        self.end = base + replayed


_SCANS: OrderedDict[str, _TurnScan] = OrderedDict()
_SCANS_LOCK = threading.Lock()
_MAX_SCANS = 16


def forget_turn_scans() -> None:
    """Drop every cached turn scan (the next queries replay their logs in full)."""
    with _SCANS_LOCK:
        _SCANS.clear()


def _log_targets(path: Path, session_id: str, generation: int) -> ForkTargetSet:
    """Targets of the log at ``path``, replaying only what the cached scan has not seen."""
    key = str(path)
    try:
        with path.open("rb") as log:
            status = os.fstat(log.fileno())
            data = memoryview(log.read())
    except FileNotFoundError:
        return target_set(session_id, generation, (), True)
    identity = (status.st_dev, status.st_ino)
    with _SCANS_LOCK:
        scan = _SCANS.get(key)
        if scan is None or (scan.identity, scan.generation) != (identity, generation):
            scan = _SCANS[key] = _TurnScan(identity, generation)
        _SCANS.move_to_end(key)
        while len(_SCANS) > _MAX_SCANS:
            _SCANS.popitem(last=False)
    with scan.lock:
        if not scan.still_describes(data, identity, generation):
            scan.restart(identity, generation)
        scan.advance(data)
        tracker = scan.tracker
        return target_set(session_id, generation, tracker.turns, tracker.verifiable)


def fork_targets(store: SessionStore, session_id: str) -> ForkTargetSet:
    """Every turn of a session as a fork target (§3.1), from committed frames only.

    Takes no lease and writes nothing. The manifest is read before and after
    the log: if a log replacement (a generation bump) raced the read, the
    read is repeated, so the answer's generation always describes its turns.
    Repeated queries in one process replay only frames committed since the
    last one (see :class:`_TurnScan`).

    Raises:
        SourceNotFound: no such session.
        StaleSource: the log kept being replaced while it was read.
    """
    directory = store.session_dir(session_id)
    for _ in range(_STABLE_READ_ATTEMPTS):
        before = load_source_manifest(directory, session_id)
        answer = _log_targets(directory / "events.log", session_id, before.generation)
        after = load_source_manifest(directory, session_id)
        if after.generation == before.generation:
            return answer
    raise StaleSource(
        f"session {session_id} kept changing generation while it was read",
        sessionId=session_id,
    )
