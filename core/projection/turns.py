"""The turn bookkeeping of a session, replayed without messages (§3.1).

A full :class:`~branchwise.core.projection.projection.Projection` creates an object per
message; fork targets need only the turn bookkeeping, so :class:`TurnTracker`
replays just that, by the same rules as the projection (a property test keeps
the two in step). The fork engine feeds the same tracker while it copies, so
a fork accepts exactly the turns :func:`~branchwise.core.fork.targets.fork_targets`
lists as available.
"""

from __future__ import annotations

from typing import Any

from branchwise.core.projection.events import EventType
from branchwise.core.projection.projection import Turn, seal_commit

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
