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
cannot disagree about what a delta means.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from branchwise.core.errors import CorruptLog
from branchwise.core.log.frames import Frame
from branchwise.core.projection.events import Event, EventType
from branchwise.core.projection.projection import Projection
from branchwise.core.projection.turns import Hook, Turn


def commits_after(frames: Iterable[Frame], after: int) -> list[list[Event]]:
    """The events after seq ``after``, grouped by commit, as ``session-events-v1`` sends them.

    A commit is sent whole from the first of its events after ``after``.

    Raises:
        CorruptLog: an event this version cannot read (a delta that
            continues no answer, a missing field).
    """
    view = _WireView(after=after)
    try:
        for frame in frames:
            view.apply(frame.events)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptLog(f"the log holds an event this version cannot read: {exc!r}") from exc
    return view.sent


@dataclass(slots=True)
class _WireView(Projection):
    """A projection that also collects the commits after ``after`` in their wire form.

    Attributes:
        after: the last seq the client holds.
        sent: the commits after it, deltas replaced by whole partial answers.
    """

    after: int = 0
    sent: list[list[Event]] = field(default_factory=list)
    # seq of a delta after ``after`` -> its answer's id, text and model just after it.
    _answers: dict[int, tuple[str, str, Any]] = field(default_factory=dict, repr=False)
    _ts: Any = None  # the last ``ts`` seen, for the events that carry none

    def apply(self, events: list[Event]) -> None:
        """Apply one whole commit and, if it ends after ``after``, note its wire form."""
        Projection.apply(self, events)
        if not events:
            return
        last = events[-1]
        if int(last["seq"]) <= self.after:
            if "ts" in last:
                self._ts = last["ts"]
            else:
                for event in reversed(events):
                    if "ts" in event:
                        self._ts = event["ts"]
                        break
            return
        commit: list[Event] = []
        for event in events:
            self._ts = event.get("ts", self._ts)
            seq = int(event["seq"])
            if seq <= self.after:
                continue
            answer = self._answers.pop(seq, None)
            if answer is not None:
                message_id, content, model = answer
                event = {
                    "seq": event["seq"],
                    "ts": self._ts,
                    "type": EventType.MESSAGE_ASSISTANT.value,
                    "messageId": message_id,
                    "content": content,
                    "model": model,
                    "partial": True,
                }
            commit.append(event)
        self.sent.append(commit)

    def _delta_sent(self, event: Event, turn: Turn | None) -> None:
        """The projection's delta hook, then the answer's text as it now stands."""
        Projection._assistant_delta(self, event, turn)
        if int(event["seq"]) <= self.after:
            return
        message_id = event.get("messageId")
        if message_id is None and turn is not None:
            message_id = turn.message_id
        message = self.message(message_id) if message_id is not None else None
        if message is None:
            raise ValueError(f"message/delta at seq {event['seq']} continues no answer")
        self._answers[int(event["seq"])] = (message.message_id, message.content, message.model)

    _HOOKS: ClassVar[Mapping[str, Hook]] = {
        **Projection._HOOKS,
        EventType.MESSAGE_DELTA.value: _delta_sent,
    }
