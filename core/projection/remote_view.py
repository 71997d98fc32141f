"""The commits after a seq as ``session-events-v1`` sends them: the projection's wire view.

A remote client catches up on a session by asking for the whole commits
after the last seq it holds, and replays them into its own projection. The
wire keeps the meaning it had before format 2 stored partial answers as
deltas: every partial commit carries the whole answer so far. So a
``message/delta`` goes out as the ``message/assistant`` with
``partial: true`` it stands for: same seq, the answer's text and model as the
projection holds them right after that delta, and the time of the last event
before it that has one. A client of any version then shows the text a local
replay shows, from any ``after``.

The text comes from a :class:`~branchwise.core.projection.projection.Projection`
replaying the log (its delta hook, observed), so the wire and the transcript
cannot disagree about what a delta means. The wire form of an event depends
only on the log before it, never on ``after``: so ``branchwise serve`` keeps
one replay per log (:class:`WireLogs`) between requests and answers a poll
from the bytes after ``after`` alone (docs/performance.md, "Serve").
"""

from __future__ import annotations

import bisect
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from branchwise.core.errors import CorruptLog
from branchwise.core.log.frames import Frame, iter_frames
from branchwise.core.log.segments import LogLayout, log_identity, read_log_from, scan_session_log
from branchwise.core.projection.events import Event, EventType
from branchwise.core.projection.projection import Projection
from branchwise.core.projection.turns import Hook, Turn

_DELTA = EventType.MESSAGE_DELTA.value
_READ_ERRORS = (KeyError, TypeError, ValueError, AttributeError)

KEEP_DELTA_COMMITS = 4096
"""How many of a log's last commits keep their deltas' wire form in a :class:`WireLog`.

A poll asks from near the end; one from further back (a client that was away
during a long stream) is answered by a full replay, as before the replay was kept.
"""


def commits_after(frames: Iterable[Frame], after: int) -> list[list[Event]]:
    """The events after seq ``after``, grouped by commit, as ``session-events-v1`` sends them.

    A commit is sent whole from the first of its events after ``after``.
    This replays every frame given; :class:`WireLogs` answers the same from
    the bytes after ``after``.

    Raises:
        CorruptLog: an event this version cannot read (a delta that
            continues no answer, a missing field).
    """
    recorder = _WireRecorder()
    later: list[list[Event]] = []
    try:
        for frame in frames:
            recorder.apply(frame.events)
            if frame.events and int(frame.events[-1]["seq"]) > after:
                later.append(frame.events)
    except _READ_ERRORS as exc:
        raise CorruptLog(f"the log holds an event this version cannot read: {exc!r}") from exc
    sent = [_wire_commit(events, after, recorder.deltas) for events in later]
    return [commit for commit in sent if commit is not None]


class _Stream:
    """The text of one answer as its deltas grew it, shared by the wire forms of those deltas.

    Each delta's wire form carries the whole answer so far; holding each of
    those texts would take memory quadratic in a long answer, so a delta keeps
    this stream and its length at that point instead.
    """

    __slots__ = ("pieces",)

    def __init__(self, text: str) -> None:
        self.pieces = [text]

    def text(self, length: int) -> str:
        if len(self.pieces) > 1:
            self.pieces = ["".join(self.pieces)]
        return self.pieces[0][:length]


@dataclass(slots=True)
class _WireRecorder(Projection):
    """A projection that also notes each delta's wire form: the answer's id, text and model.

    Attributes:
        deltas: seq of a delta -> its message id, stream and length, model, and time.
    """

    deltas: dict[int, tuple[str, _Stream, int, Any, Any]] = field(default_factory=dict)
    _ts: Any = None  # the last ``ts`` seen before the commit being applied
    _commit: list[Event] = field(default_factory=list, repr=False)
    # message id -> its stream, and the message's seq and text length when the stream last grew
    _streams: dict[str, tuple[_Stream, int, int]] = field(default_factory=dict, repr=False)

    def apply(self, events: list[Event]) -> None:
        """Apply one whole commit, noting the wire form of each of its deltas."""
        self._commit = events
        Projection.apply(self, events)
        for event in reversed(events):
            if "ts" in event:
                self._ts = event["ts"]
                break

    def _time_before(self, event: Event) -> Any:
        """The time of the last event before ``event`` that has one (a commit's seqs are dense)."""
        commit = self._commit
        position = int(event["seq"]) - int(commit[0]["seq"])
        for index in range(position - 1, -1, -1):
            if "ts" in commit[index]:
                return commit[index]["ts"]
        return self._ts

    def _delta_noted(self, event: Event, turn: Turn | None) -> None:
        """The projection's delta hook, then the answer's text as it now stands."""
        message_id = event.get("messageId")
        if message_id is None and turn is not None:
            message_id = turn.message_id
        before = self.message(message_id) if message_id is not None else None
        known = self._streams.get(message_id) if message_id is not None else None
        # The stream goes on only if nothing but its own deltas changed the text since.
        goes_on = (
            known is not None
            and before is not None
            and (before.seq, len(before.content)) == (known[1], known[2])
        )
        Projection._assistant_delta(self, event, turn)
        message = self.message(message_id) if message_id is not None else None
        if message is None:
            raise ValueError(f"message/delta at seq {event['seq']} continues no answer")
        if goes_on and known is not None:
            stream = known[0]
            stream.pieces.append(event["delta"])
        else:  # a new answer, or its text was replaced since: start from the whole text
            stream = _Stream(message.content)
        length = len(message.content)
        self._streams[message.message_id] = (stream, message.seq, length)
        self.deltas[int(event["seq"])] = (
            message.message_id,
            stream,
            length,
            message.model,
            self._time_before(event),
        )

    _HOOKS: ClassVar[Mapping[str, Hook]] = {
        **Projection._HOOKS,
        _DELTA: _delta_noted,
    }


def _wire_commit(
    events: list[Event], after: int, deltas: Mapping[int, tuple[str, _Stream, int, Any, Any]]
) -> list[Event] | None:
    """One commit's events after ``after`` in wire form; ``None`` if a delta's form was let go."""
    commit: list[Event] = []
    for event in events:
        seq = int(event["seq"])
        if seq <= after:
            continue
        if event.get("type") == _DELTA:
            noted = deltas.get(seq)
            if noted is None:
                return None
            message_id, stream, length, model, ts = noted
            event = {
                "seq": event["seq"],
                "ts": ts,
                "type": EventType.MESSAGE_ASSISTANT.value,
                "messageId": message_id,
                "content": stream.text(length),
                "model": model,
                "partial": True,
            }
        commit.append(event)
    return commit


@dataclass(frozen=True, slots=True)
class WireAnswer:
    """What the events route sends: the commits after ``after`` and the log's last seq.

    Attributes:
        after: the seq the commits follow (the one asked, or where the last turns start).
        commits: the commits after it, in wire form.
        last_seq: the last seq of the log as read.
    """

    after: int
    commits: list[list[Event]]
    last_seq: int


class WireLog:
    """One log replayed for the wire and kept: where each commit starts and ends, and the state.

    Valid for one log file (device and inode of its first piece, which a
    migration and a fork keep), one generation, and the very bytes replayed:
    a log only grows within a generation, and the last frame replayed is
    read again and checksummed before anything after it is taken. Anything
    else (a rewritten log, a new generation) replays from the start.
    """

    def __init__(self, keep_delta_commits: int = KEEP_DELTA_COMMITS) -> None:
        self.lock = threading.Lock()
        self._keep = keep_delta_commits
        self._reset((0, 0), -1)

    def _reset(self, identity: tuple[int, int], generation: int) -> None:
        self.identity = identity
        self.generation = generation
        self.recorder = _WireRecorder()
        self.starts: list[int] = []  # virtual offset of each commit's frame
        self.ends: list[int] = []  # last seq of each commit
        self.first_seq = 1
        self.end = 0  # where the last whole frame replayed ends
        self.last_crc = 0  # of the last frame replayed

    def catch_up(self, directory: Path, manifest: LogLayout, generation: int) -> None:
        """Replay the frames committed since the last call (all of them the first time).

        Raises:
            CorruptLog: an event this version cannot read.
        """
        device, inode, size = log_identity(directory, manifest)
        if (
            not self.ends
            or (device, inode) != self.identity
            or generation != self.generation
            or size < self.end
        ):
            self._fill(directory, manifest, (device, inode), generation)
            return
        last = self.starts[-1]
        data = memoryview(read_log_from(directory, manifest, last))
        if len(data) < self.end - last or zlib.crc32(data[: self.end - last]) != self.last_crc:
            self._fill(directory, manifest, (device, inode), generation)
            return
        frames = iter_frames(
            data,
            start=self.end - last,
            first_commit=len(self.ends) + 1,
            first_seq=self.ends[-1] + 1,
        )
        self._replay(
            (frame._replace(offset=frame.offset + last, end=frame.end + last), data, last)
            for frame in frames
        )

    def _fill(
        self, directory: Path, manifest: LogLayout, identity: tuple[int, int], generation: int
    ) -> None:
        self._reset(identity, generation)
        log = scan_session_log(directory, manifest)
        self.recorder.seed_length = log.manifest.seed_length
        if log.scan.frames:
            self.first_seq = int(log.scan.frames[0].events[0]["seq"])
        self._replay((frame, log.data, 0) for frame in log.scan.frames)

    def _replay(self, frames: Iterable[tuple[Frame, Any, int]]) -> None:
        """Apply frames (virtual offsets; each with the bytes it is in and where they start)."""
        last: tuple[Frame, Any, int] | None = None
        try:
            for item in frames:
                frame = item[0]
                self.recorder.apply(frame.events)
                self.starts.append(frame.offset)
                self.ends.append(int(frame.events[-1]["seq"]))
                last = item
        except _READ_ERRORS as exc:
            self._reset((0, 0), -1)  # never keep a half-replayed state
            raise CorruptLog(f"the log holds an event this version cannot read: {exc!r}") from exc
        except BaseException:
            self._reset((0, 0), -1)
            raise
        if last is not None:
            frame, data, base = last
            self.end = frame.end
            self.last_crc = zlib.crc32(data[frame.offset - base : frame.end - base])
        self._let_go()

    def _let_go(self) -> None:
        """Forget the wire form of deltas older than the last ``keep_delta_commits`` commits."""
        if len(self.ends) <= self._keep:
            return
        horizon = self.ends[-self._keep - 1]
        deltas = self.recorder.deltas
        while deltas:
            oldest = next(iter(deltas))
            if oldest > horizon:
                break
            del deltas[oldest]

    @property
    def last_seq(self) -> int:
        return self.ends[-1] if self.ends else 0

    def after_last_turns(self, turns: int) -> int:
        """The seq the last ``turns`` turns follow (0: the log has no more turns than that)."""
        every = self.recorder.turns
        if turns <= 0:
            return self.last_seq
        if len(every) <= turns:
            return 0
        return every[-turns].start_seq - 1

    def commits_after(
        self, directory: Path, manifest: LogLayout, after: int
    ) -> list[list[Event]] | None:
        """The wire commits after ``after`` from the bytes after it; ``None`` if it cannot say.

        It cannot when the log changed under the read (the caller replays it
        whole) or a delta after ``after`` is older than the forms kept.
        """
        first = bisect.bisect_right(self.ends, after)
        if first == len(self.ends):
            return []
        start = self.starts[first]
        data = memoryview(read_log_from(directory, manifest, start))[: self.end - start]
        first_seq = self.ends[first - 1] + 1 if first else self.first_seq
        sent: list[list[Event]] = []
        for frame in iter_frames(data, first_commit=first + 1, first_seq=first_seq):
            commit = _wire_commit(frame.events, after, self.recorder.deltas)
            if commit is None:
                return None
            sent.append(commit)
        return sent if len(sent) == len(self.ends) - first else None


class WireLogs:
    """The wire replays of recently asked logs, kept by ``branchwise serve`` between requests.

    A desktop following a conversation polls its events after every commit;
    with the replay kept, each poll reads and decodes only the commits after
    what the desktop holds (plus the last frame replayed, checked again),
    so it costs what is new, not the whole conversation. Thread-safe: logs
    are answered in parallel, the requests of one log take turns.

    Args:
        max_logs: how many logs' replays to keep (least recently asked go first).
        keep_delta_commits: how many last commits of each keep their deltas' wire form
            (:data:`KEEP_DELTA_COMMITS`).
    """

    def __init__(self, max_logs: int = 8, keep_delta_commits: int = KEEP_DELTA_COMMITS) -> None:
        self._logs: OrderedDict[str, WireLog] = OrderedDict()
        self._lock = threading.Lock()
        self._max_logs = max_logs
        self._keep = keep_delta_commits

    def _log(self, directory: Path) -> WireLog:
        key = str(directory)
        with self._lock:
            log = self._logs.get(key)
            if log is None:
                log = self._logs[key] = WireLog(self._keep)
            self._logs.move_to_end(key)
            while len(self._logs) > self._max_logs:
                self._logs.popitem(last=False)
        return log

    def answer(
        self,
        directory: Path,
        manifest: LogLayout,
        generation: int,
        *,
        after: int = 0,
        last_turns: int | None = None,
    ) -> WireAnswer:
        """The commits after ``after``, or those of the last ``last_turns`` turns (then ``after``
        is where they start), as a full replay of the log would give them.

        Raises:
            CorruptLog: an event this version cannot read.
        """
        log = self._log(directory)
        with log.lock:
            log.catch_up(directory, manifest, generation)
            if last_turns is not None:
                after = log.after_last_turns(last_turns)
            commits = log.commits_after(directory, manifest, after)
            last_seq = log.last_seq
            if commits is None:
                scan = scan_session_log(directory, manifest).scan
                commits = commits_after(
                    (f for f in scan.frames if f.events and f.events[-1]["seq"] <= last_seq), after
                )
        return WireAnswer(after, commits, last_seq)
