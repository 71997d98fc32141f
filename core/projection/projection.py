"""Replaying committed events into the state everyone reads (DESIGN §2.3).

A :class:`Projection` is fed whole commits, in order, and keeps the
transcript, the turns with their boundaries, open interactions and tool calls,
usage totals and lineage fields. It is the single interpretation of a log:
the CLI, the fork engine, the runtime and the UI all read it, and "the state
as of commit N" is just a projection fed the first N commits.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from branchwise.core.projection.events import EventType

_T = EventType
# Plain strings: comparing against enum members costs an attribute lookup per event.
_TURN_START = str(EventType.TURN_START)
_TURN_END = str(EventType.TURN_END)
_MESSAGE_USER = str(EventType.MESSAGE_USER)
_MESSAGE_ASSISTANT = str(EventType.MESSAGE_ASSISTANT)


@dataclass(slots=True)
class Message:
    """One transcript entry.

    Attributes:
        message_id: stable id (the UI's key).
        role: ``user``, ``assistant`` or ``tool``.
        content: the text (latest partial text while an answer streams).
        turn_id: the turn it belongs to, ``None`` for imported history.
        partial: the answer is still streaming (or was cut by a crash).
        model: which model wrote an assistant message.
        seq: seq of the event that last set the content.
    """

    message_id: str
    role: str
    content: str
    turn_id: str | None = None
    partial: bool = False
    model: str | None = None
    seq: int = 0


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


@dataclass(slots=True)
class Projection:
    """State rebuilt from committed events; feed it commits with :meth:`apply`."""

    title: str = ""
    kind: str = "root"
    messages: list[Message] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    open_interactions: dict[str, str] = field(default_factory=dict)
    open_tool_calls: dict[str, str] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    legacy_messages: int = 0
    fork: dict[str, Any] | None = None
    children: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: dict[str, list[str]] = field(default_factory=dict)
    last_seq: int = 0
    commits: int = 0
    _by_message: dict[str, Message] = field(default_factory=dict)
    _by_turn: dict[str, Turn] = field(default_factory=dict)

    @classmethod
    def replay(cls, commits: Iterable[list[dict[str, Any]]]) -> Projection:
        """Build a projection from commits (each a list of events), in order."""
        projection = cls()
        for events in commits:
            projection.apply(events)
        return projection

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
        """The turn with this id, if any."""
        return self._by_turn.get(turn_id)

    def message(self, message_id: str) -> Message | None:
        """The message with this id, if any."""
        return self._by_message.get(message_id)

    def model_messages(self) -> list[dict[str, str]]:
        """The conversation as a model sees it: user and assistant texts in order."""
        return [
            {"role": m.role, "content": m.content}
            for m in self.messages
            if m.role in ("user", "assistant")
        ]

    def apply(self, events: list[dict[str, Any]]) -> None:
        """Apply one whole commit.

        Messages, the bulk of every log, are handled inline: a replay of a big
        session spends its time here, and a method call per event shows.
        """
        closed: list[Turn] = []
        handlers = _HANDLERS
        by_message = self._by_message
        messages = self.messages
        turns = self.turns
        for event in events:
            kind = event["type"]
            is_assistant = kind == _MESSAGE_ASSISTANT
            if is_assistant or kind == _MESSAGE_USER:
                turn = turns[-1] if turns and turns[-1].end_reason is None else None
                message_id = event["messageId"]
                message = by_message.get(message_id)
                if message is None:
                    message = Message(
                        message_id,
                        "assistant" if is_assistant else "user",
                        event["content"],
                        turn.turn_id if turn is not None else None,
                        False,
                        None,
                        event["seq"],
                    )
                    messages.append(message)
                    by_message[message_id] = message
                else:
                    message.content = event["content"]
                    message.seq = event["seq"]
                if is_assistant:
                    message.model = event.get("model")
                    message.partial = bool(event.get("partial", False))
                    if turn is not None:
                        turn.message_id = message_id
                elif turn is not None and turn.user_message_id is None:
                    turn.user_message_id = message_id
                continue
            handler = handlers.get(kind)
            if handler is not None:
                handler(self, event)
                if kind == _TURN_END:
                    turn = self._by_turn.get(event["turnId"])
                    if turn is not None:
                        closed.append(turn)
                elif kind == _TURN_START and closed:
                    for turn in closed:
                        turn.closing_commit_spills = True
        self.last_seq = seal_commit(self, events, closed)

    # -- per-type handlers -------------------------------------------------

    def _created(self, event: dict[str, Any]) -> None:
        self.title = event["title"]
        self.kind = event["kind"]

    def _title(self, event: dict[str, Any]) -> None:
        self.title = event["title"]

    def _fork(self, event: dict[str, Any]) -> None:
        self.fork = {k: v for k, v in event.items() if k not in ("seq", "ts", "type")}

    def _child(self, event: dict[str, Any]) -> None:
        self.children.append({k: v for k, v in event.items() if k not in ("ts", "type")})

    def _turn_start(self, event: dict[str, Any]) -> None:
        turn = Turn(event["turnId"], len(self.turns) + 1, event["seq"])
        self.turns.append(turn)
        self._by_turn[turn.turn_id] = turn

    def _turn_end(self, event: dict[str, Any]) -> None:
        turn = self._by_turn.get(event["turnId"])
        if turn is not None and turn.is_open:
            turn.end_reason = event["reason"]
            turn.error = event.get("error")
            messages = self.messages
            for index in range(len(messages) - 1, -1, -1):
                if messages[index].turn_id != turn.turn_id:
                    break
                messages[index].partial = False

    def _current_turn(self) -> Turn | None:
        turns = self.turns
        if turns:
            last = turns[-1]
            if last.end_reason is None:
                return last
        return None

    def _current_turn_id(self) -> str | None:
        turn = self._current_turn()
        return turn.turn_id if turn is not None else None

    def _put(self, event: dict[str, Any], role: str, turn_id: str | None) -> Message:
        message_id = event["messageId"]
        message = self._by_message.get(message_id)
        if message is None:
            message = Message(
                message_id, role, event["content"], turn_id, False, None, event["seq"]
            )
            self.messages.append(message)
            self._by_message[message_id] = message
        else:
            message.content = event["content"]
            message.seq = event["seq"]
        return message

    def _tool_call(self, event: dict[str, Any]) -> None:
        self.open_tool_calls[event["callId"]] = event["name"]
        args = event.get("args")
        self._put(
            {
                "messageId": event["callId"],
                "content": f"{event['name']}({args})",
                "seq": event["seq"],
            },
            "tool",
            self._current_turn_id(),
        )

    def _tool_result(self, event: dict[str, Any]) -> None:
        self.open_tool_calls.pop(event["callId"], None)
        message = self._by_message.get(event["callId"])
        if message is not None:
            message.content = f"{message.content} → {event['output']}"

    def _interaction(self, event: dict[str, Any]) -> None:
        self.open_interactions[event["interactionId"]] = event["kind"]

    def _resolve(self, event: dict[str, Any]) -> None:
        self.open_interactions.pop(event["interactionId"], None)

    def _checkpoint(self, event: dict[str, Any]) -> None:
        self.checkpoints[event["checkpointId"]] = list(event["blobs"])

    def _usage(self, event: dict[str, Any]) -> None:
        self.input_tokens += int(event["inputTokens"])
        self.output_tokens += int(event["outputTokens"])

    def _legacy(self, event: dict[str, Any]) -> None:
        for number, item in enumerate(event["messages"]):
            role = item.get("role", "user") if isinstance(item, dict) else "user"
            content = item.get("content", "") if isinstance(item, dict) else str(item)
            self._put(
                {
                    "messageId": f"legacy-{event['seq']}-{number}",
                    "content": content,
                    "seq": event["seq"],
                },
                role if role in ("user", "assistant") else "user",
                None,
            )
            self.legacy_messages += 1


class _CommitState(Protocol):
    commits: int
    last_seq: int
    open_interactions: dict[str, str]
    open_tool_calls: dict[str, str]


def seal_commit(state: _CommitState, events: list[dict[str, Any]], closed: list[Turn]) -> int:
    """Finish applying one commit: count it and give the turns it closed their boundary.

    A closed turn's boundary is the *last* seq of its closing commit, and its
    open authority is whatever interactions or tool calls that whole commit
    left open. Shared by the full projection and the fork engine's turn-only
    tracker so both read boundaries the same way. Returns the new last seq.
    """
    last_seq = int(events[-1]["seq"]) if events else state.last_seq
    state.commits += 1
    if closed:
        open_now = tuple(state.open_interactions) + tuple(state.open_tool_calls)
        for turn in closed:
            turn.boundary_sequence = last_seq
            turn.open_authority = open_now
    return last_seq


_HANDLERS: dict[str, Any] = {
    str(_T.SESSION_CREATED): Projection._created,
    str(_T.SESSION_TITLE): Projection._title,
    str(_T.SESSION_FORK): Projection._fork,
    str(_T.SESSION_CHILD): Projection._child,
    str(_T.TURN_START): Projection._turn_start,
    str(_T.TURN_END): Projection._turn_end,
    str(_T.TOOL_CALL): Projection._tool_call,
    str(_T.TOOL_RESULT): Projection._tool_result,
    str(_T.INTERACTION_REQUEST): Projection._interaction,
    str(_T.INTERACTION_RESOLVE): Projection._resolve,
    str(_T.CHECKPOINT): Projection._checkpoint,
    str(_T.USAGE): Projection._usage,
    str(_T.LEGACY_IMPORT): Projection._legacy,
}
