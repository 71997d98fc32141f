"""The events route's answer as it was built before serve kept a replay: the reference.

A copy of the wire view as it stood when every request replayed the whole
log (only its name changed), so the kept replay's answers are set against
an implementation they share no code with.
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


def replayed_whole(frames: Iterable[Frame], after: int) -> list[list[Event]]:
    """The wire commits after ``after`` as the route built them before it kept a replay:
    every frame replayed into one projection per request (kept as it was, as the reference)."""
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
        self._answers[int(event["seq"])] = (message_id, message.content, message.model)

    _HOOKS: ClassVar[Mapping[str, Hook]] = {
        **Projection._HOOKS,
        EventType.MESSAGE_DELTA.value: _delta_sent,
    }
