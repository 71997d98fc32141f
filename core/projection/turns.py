"""The one set of turn rules: what a turn is, where it ends, whether it can be cut.

A :class:`TurnTracker` is fed whole commits in order and keeps the turns with
their fork boundaries, the interactions and tool calls still open, and the
message-only history that makes a session unverifiable (docs/storage.md,
"Events"). It is the single
interpretation of turns: the full
:class:`~branchwise.core.projection.projection.Projection` is a tracker that
also builds messages, title and usage (through :attr:`TurnTracker._HOOKS`),
and fork targets and the fork engine replay a bare tracker, which makes no
message objects. So the live projection, a cold targets query and a fork read
boundaries by the same code, and a fork accepts exactly the turns
:func:`~branchwise.core.fork.targets.fork_targets` lists as available.

The rules:

* A turn runs from its ``turn/start`` to its first ``turn/end`` (a repeated
  ``turn/end`` keeps the first reason). Its *boundary* is the last seq of the
  commit that closed it, and its *open authority* the interactions and tool
  calls that whole commit left open.
* A closing commit that also starts a later turn *spills*: no cut can end
  exactly at the turn it closed.
* The first user message in a turn binds as ``user_message_id``; every
  assistant message, and the opening ``message/delta`` of a streaming one,
  rebinds ``message_id`` (the latest one is the answer; a later delta
  continues it).
* A turn id used twice means the latest turn of that id.
* Message-only history (``legacy/import`` messages and no turn records) is
  not verifiable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from branchwise.core.projection.events import EventType


@dataclass(slots=True)
class Turn:
    """One turn and its fork boundary.

    Attributes:
        turn_id: the turn's id.
        index: 1-based position among the session's turns.
        start_seq: seq of its ``turn/start``.
        user_message_id: the user's message that opened it.
        message_id: the final assistant message (the UI binds to this).
        boundary_sequence: last seq of the commit that closed the turn.
        end_reason: ``None`` while open.
        error: a failure's text when the turn ended in error.
        open_authority: interactions/tool calls still open after the closing commit.
        closing_commit_spills: the closing commit also holds a later turn's events,
            so no cut can end exactly at this turn.
    """

    turn_id: str
    index: int
    start_seq: int
    user_message_id: str | None = None
    message_id: str | None = None
    boundary_sequence: int | None = None
    end_reason: str | None = None
    error: str | None = None
    open_authority: tuple[str, ...] = ()
    closing_commit_spills: bool = False

    @property
    def is_open(self) -> bool:
        """The turn has not ended yet."""
        return self.end_reason is None

    def to_json(self) -> dict[str, Any]:
        """camelCase summary for the CLI."""
        return {
            "turnId": self.turn_id,
            "messageId": self.message_id,
            "boundarySequence": self.boundary_sequence,
            "endReason": self.end_reason,
        }


#: A subclass's handling of one event type: ``hook(state, event, turn)``, where
#: ``turn`` is the turn the event belongs to (after the turn rules applied it):
#: the open trailing turn for messages and tool calls, the new turn for a
#: ``turn/start``, the turn it ended for a ``turn/end`` (``None`` when that
#: turn was unknown or had ended before).
Hook = Callable[[Any, dict[str, Any], Turn | None], None]

# The event types the turn rules read, as small codes.
(
    _C_ASSISTANT,
    _C_DELTA,
    _C_USER,
    _C_TURN_START,
    _C_TURN_END,
    _C_TOOL_CALL,
    _C_TOOL_RESULT,
    _C_REQUEST,
    _C_RESOLVE,
    _C_LEGACY,
) = range(10)
_CODES: dict[str, int] = {
    EventType.MESSAGE_ASSISTANT.value: _C_ASSISTANT,
    EventType.MESSAGE_DELTA.value: _C_DELTA,
    EventType.MESSAGE_USER.value: _C_USER,
    EventType.TURN_START.value: _C_TURN_START,
    EventType.TURN_END.value: _C_TURN_END,
    EventType.TOOL_CALL.value: _C_TOOL_CALL,
    EventType.TOOL_RESULT.value: _C_TOOL_RESULT,
    EventType.INTERACTION_REQUEST.value: _C_REQUEST,
    EventType.INTERACTION_RESOLVE.value: _C_RESOLVE,
    EventType.LEGACY_IMPORT.value: _C_LEGACY,
}
_Dispatch = Mapping[str, tuple[int | None, Hook | None]]


def _dispatch(hooks: Mapping[str, Hook]) -> _Dispatch:
    """Event type -> (turn rule code, hook): one dict lookup per event in the hot loop.

    Types that neither the rules nor the hooks read (steps, and for the bare
    tracker usage and checkpoints) are absent, so they cost only the lookup.
    """
    return {kind: (_CODES.get(kind), hooks.get(kind)) for kind in (*_CODES, *hooks)}


@dataclass(slots=True)
class TurnTracker:
    """The turn bookkeeping of a session; feed it whole commits with :meth:`apply`.

    Attributes:
        turns: every turn, in order of ``turn/start``.
        open_interactions: interaction id -> kind, still awaiting a resolve.
        open_tool_calls: call id -> tool name, still awaiting a result.
        legacy_messages: how many imported (pre-turn) messages the log holds.
        last_seq: seq of the last event applied (0 before any).
        commits: how many commits were applied.
    """

    turns: list[Turn] = field(default_factory=list)
    open_interactions: dict[str, str] = field(default_factory=dict)
    open_tool_calls: dict[str, str] = field(default_factory=dict)
    legacy_messages: int = 0
    last_seq: int = 0
    commits: int = 0
    _by_turn: dict[str, Turn] = field(default_factory=dict, repr=False)

    #: Event type -> what a subclass does with it besides the turn rules. The
    #: bare tracker has none, so it creates no objects but turns.
    _HOOKS: ClassVar[Mapping[str, Hook]] = {}
    _DISPATCH: ClassVar[_Dispatch] = _dispatch({})

    def __init_subclass__(cls) -> None:
        # No super() call: object's does nothing, and a zero-argument super()
        # fails in the class that dataclass(slots=True) re-creates.
        cls._DISPATCH = _dispatch(cls._HOOKS)

    @classmethod
    def replay(cls, commits: Iterable[list[dict[str, Any]]]) -> Self:
        """Build the state from commits (each a list of events), in order."""
        state = cls()
        for events in commits:
            state.apply(events)
        return state

    @property
    def verifiable(self) -> bool:
        """False for message-only history: messages but no turn records."""
        return not (self.legacy_messages and not self.turns)

    @property
    def open_turn(self) -> Turn | None:
        """The trailing turn if it has not ended."""
        if self.turns and self.turns[-1].is_open:
            return self.turns[-1]
        return None

    def turn(self, turn_id: str) -> Turn | None:
        """The turn with this id (the latest one if a log repeats an id)."""
        return self._by_turn.get(turn_id)

    def apply(self, events: list[dict[str, Any]]) -> None:
        """Apply one whole commit: the turn rules, then each event's hook.

        A replay of a big session spends its time in this loop, so the rules
        are inline and a hook is one call for the events a subclass handles.
        """
        turns = self.turns
        by_turn = self._by_turn
        dispatch = self._DISPATCH.get
        trailing = turns[-1] if turns and turns[-1].end_reason is None else None
        closed: list[Turn] = []
        for event in events:
            entry = dispatch(event["type"])
            if entry is None:
                continue
            code, hook = entry
            turn = trailing
            if code is None:
                pass
            elif code == _C_ASSISTANT:
                if trailing is not None:
                    trailing.message_id = event["messageId"]
            elif code == _C_DELTA:
                if trailing is not None and "messageId" in event:
                    trailing.message_id = event["messageId"]
            elif code == _C_USER:
                if trailing is not None and trailing.user_message_id is None:
                    trailing.user_message_id = event["messageId"]
            elif code == _C_TURN_START:
                turn = trailing = Turn(event["turnId"], len(turns) + 1, event["seq"])
                turns.append(trailing)
                by_turn[trailing.turn_id] = trailing
                for earlier in closed:
                    earlier.closing_commit_spills = True
            elif code == _C_TURN_END:
                turn = by_turn.get(event["turnId"])
                if turn is not None:
                    closed.append(turn)  # a repeated end moves the boundary too
                    if turn.end_reason is None:
                        turn.end_reason = event["reason"]
                        turn.error = event.get("error")
                        if turn is trailing:
                            trailing = None
                    else:
                        turn = None
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
            if hook is not None:
                hook(self, event, turn)
        if events:
            self.last_seq = int(events[-1]["seq"])
        self.commits += 1
        if closed:
            open_now = tuple(self.open_interactions) + tuple(self.open_tool_calls)
            for turn in closed:
                turn.boundary_sequence = self.last_seq
                turn.open_authority = open_now
