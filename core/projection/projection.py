"""Replaying committed events into the state everyone reads (docs/storage.md, "Events").

A :class:`Projection` is fed whole commits, in order, and keeps the
transcript, the turns with their boundaries, open interactions and tool calls,
usage totals and lineage fields. It is the single interpretation of a log:
the CLI, the fork engine, the runtime and the UI all read it, and "the state
as of commit N" is just a projection fed the first N commits.

The turns are not interpreted here: a projection is a
:class:`~branchwise.core.projection.turns.TurnTracker` (the one set of turn
rules, which fork targets replay without messages) whose hooks build the
messages, title, usage and lineage on top.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from branchwise.core.conversation.settings import ConversationSettings, from_event
from branchwise.core.projection.attachments import AttachmentRef, attachments_of
from branchwise.core.projection.events import EventType
from branchwise.core.projection.figures import AnswerFigures, figures_from_record
from branchwise.core.projection.turns import Hook, Turn, TurnTracker

MERGE_PREFIX = "Context I brought back from a side conversation (a branch of this one):\n\n"
"""How a merged item reads to the model (fixed English: it frames data, not UI)."""


@dataclass(slots=True)
class Message:
    """One transcript entry.

    Attributes:
        message_id: stable id (the UI's key).
        role: ``user``, ``assistant`` or ``tool``.
        content: the text (the text so far while an answer streams: the
            last whole text, then every ``message/delta`` after it).
        turn_id: the turn it belongs to, ``None`` for imported history.
        partial: the answer is still streaming (or was cut by a crash).
        model: which model wrote an assistant message.
        seq: seq of the event that last set the content.
        attachments: the files a user message carries (references to stored bytes).
    """

    message_id: str
    role: str
    content: str
    turn_id: str | None = None
    partial: bool = False
    model: str | None = None
    seq: int = 0
    attachments: tuple[AttachmentRef, ...] = ()


@dataclass(slots=True)
class Projection(TurnTracker):
    """State rebuilt from committed events; feed it commits with :meth:`apply`.

    The turn fields and :meth:`apply` are the :class:`TurnTracker`'s; the
    fields below are what its hooks build.

    Attributes:
        title: the session's title (the latest ``session/title``).
        kind: ``root``, ``fork`` or ``child``, from ``session/created``.
        messages: the transcript: user, assistant and tool messages in order.
        input_tokens: usage reported so far (input side).
        output_tokens: usage reported so far (output side).
        fork: the ``session/fork`` record of a forked session.
        children: the ``session/child`` records.
        checkpoints: checkpoint id -> the blobs it names.
        settings: the conversation's own model, system prompt and temperature
            (the latest ``session/config``).
        merges: the ``session/merge`` records (what branches brought back), with ``seq``.
        seed_length: the seq a fork inherited through: ``usage`` up to it
            was paid by the parent, so it is not counted again (docs/storage.md, "Invariants" 6).
        turn_usage: turn id -> what its ``usage`` events recorded, summed
            (``inputTokens``, ``outputTokens``, ``estimated``, ``firstTokenMs``,
            ``generationMs`` and the last ``seq``); read it through
            :meth:`answer_figures`. Inherited turns are kept too (their answers
            are shown with their figures) and marked by their seq.
    """

    title: str = ""
    kind: str = "root"
    messages: list[Message] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    fork: dict[str, Any] | None = None
    children: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: dict[str, list[str]] = field(default_factory=dict)
    settings: ConversationSettings = field(default_factory=ConversationSettings)
    merges: list[dict[str, Any]] = field(default_factory=list)
    seed_length: int = 0
    turn_usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    _by_message: dict[str, Message] = field(default_factory=dict, repr=False)

    def message(self, message_id: str) -> Message | None:
        """The message with this id, if any."""
        return self._by_message.get(message_id)

    def answer_figures(self, turn_id: str) -> AnswerFigures | None:
        """A turn's token and speed figures (``None`` when its log recorded no usage)."""
        record = self.turn_usage.get(turn_id)
        return figures_from_record(record, self.seed_length) if record is not None else None

    def model_messages(self) -> list[dict[str, str]]:
        """The conversation as a model sees it: user and assistant texts in order.

        A turn that failed before any answer arrived (ended ``error``, or
        ``interrupted`` by a crash, with no assistant text) is left out: the
        transcript still shows it, but its unanswered prompt (and its files)
        is not sent again with every later message. What a branch brought
        back goes to the model as the user's message, introduced as such
        (:data:`MERGE_PREFIX`).
        """
        return [message for message, _ in self.model_messages_with_attachments()]

    def model_messages_with_attachments(
        self,
    ) -> list[tuple[dict[str, str], tuple[AttachmentRef, ...]]]:
        """:meth:`model_messages`, each with the files its message carries.

        The runtime turns the files into content parts
        (:func:`~branchwise.core.conversation.attachments.model_context`);
        reading their bytes is not the projection's business.
        """
        unanswered = {
            t.turn_id
            for t in self.turns
            if t.end_reason in ("error", "interrupted") and t.message_id is None
        }
        context: list[tuple[dict[str, str], tuple[AttachmentRef, ...]]] = []
        for m in self.messages:
            if m.turn_id is not None and m.turn_id in unanswered:
                continue
            if m.role in ("user", "assistant"):
                context.append(({"role": m.role, "content": m.content}, m.attachments))
            elif m.role == "merge":
                context.append(({"role": "user", "content": MERGE_PREFIX + m.content}, ()))
        return context

    # -- hooks: what the turn rules leave to the projection ----------------

    def _user(self, event: dict[str, Any], turn: Turn | None) -> None:
        message = self._put(event, "user", turn.turn_id if turn is not None else None)
        message.attachments = attachments_of(event)

    def attachment_refs(self) -> list[AttachmentRef]:
        """Every attachment this conversation's messages refer to, inherited ones included."""
        return [item for m in self.messages for item in m.attachments]

    def _assistant(self, event: dict[str, Any], turn: Turn | None) -> None:
        message = self._put(event, "assistant", turn.turn_id if turn is not None else None)
        message.model = event.get("model")
        message.partial = bool(event.get("partial", False))

    def _assistant_delta(self, event: dict[str, Any], turn: Turn | None) -> None:
        """Text a streaming answer gained: appended to what its message holds so far.

        An opening delta names its message (and creates it: format 2 stores
        no whole partial text before it); a later one continues the answer
        its open turn is streaming. A whole ``message/assistant`` after deltas
        replaces the text, as the closing commit's final answer does.

        Raises:
            ValueError: a delta that continues no answer (a writer's bug; the
                replay refuses the log as corrupt rather than drop text).
            TypeError: a delta that is not text.
        """
        delta = event["delta"]
        if type(delta) is not str:
            raise TypeError(f"message/delta at seq {event['seq']} has no text delta")
        message_id = event.get("messageId")
        if message_id is None:
            message_id = turn.message_id if turn is not None else None
            if message_id is None:
                raise ValueError(f"message/delta at seq {event['seq']} continues no answer")
        message = self._by_message.get(message_id)
        if message is None:
            message = self._put(
                {"messageId": message_id, "content": delta, "seq": event["seq"]},
                "assistant",
                turn.turn_id if turn is not None else None,
            )
        else:
            message.content += delta
            message.seq = event["seq"]
        if "model" in event:
            message.model = event["model"]
        message.partial = True

    def _turn_end(self, event: dict[str, Any], turn: Turn | None) -> None:
        """A turn that ended now: its answers stop streaming (even if a crash cut them)."""
        if turn is None:
            return
        messages = self.messages
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].turn_id != turn.turn_id:
                break
            messages[index].partial = False

    def _created(self, event: dict[str, Any], turn: Turn | None) -> None:
        self.title = event["title"]
        self.kind = event["kind"]

    def _title(self, event: dict[str, Any], turn: Turn | None) -> None:
        self.title = event["title"]

    def _config(self, event: dict[str, Any], turn: Turn | None) -> None:
        self.settings = from_event(event)

    def _merge(self, event: dict[str, Any], turn: Turn | None) -> None:
        """A branch's conclusion: its own transcript item, and context for later turns."""
        self.merges.append({k: v for k, v in event.items() if k not in ("ts", "type")})
        self._put(
            {
                "messageId": f"merge-{event['seq']}",
                "content": event["content"],
                "seq": event["seq"],
            },
            "merge",
            None,
        )

    def _fork(self, event: dict[str, Any], turn: Turn | None) -> None:
        self.fork = {k: v for k, v in event.items() if k not in ("seq", "ts", "type")}

    def _child(self, event: dict[str, Any], turn: Turn | None) -> None:
        self.children.append({k: v for k, v in event.items() if k not in ("ts", "type")})

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

    def _tool_call(self, event: dict[str, Any], turn: Turn | None) -> None:
        """A tool call shows in the transcript as a ``tool`` message of its turn."""
        args = event.get("args")
        self._put(
            {
                "messageId": event["callId"],
                "content": f"{event['name']}({args})",
                "seq": event["seq"],
            },
            "tool",
            turn.turn_id if turn is not None else None,
        )

    def _tool_result(self, event: dict[str, Any], turn: Turn | None) -> None:
        message = self._by_message.get(event["callId"])
        if message is not None:
            message.content = f"{message.content} → {event['output']}"

    def _checkpoint(self, event: dict[str, Any], turn: Turn | None) -> None:
        self.checkpoints[event["checkpointId"]] = list(event["blobs"])

    def _usage(self, event: dict[str, Any], turn: Turn | None) -> None:
        owner = turn if turn is not None else (self.turns[-1] if self.turns else None)
        if owner is not None:
            record = self.turn_usage.get(owner.turn_id)
            if record is None:
                record = self.turn_usage[owner.turn_id] = {"inputTokens": 0, "outputTokens": 0}
            record["inputTokens"] += int(event["inputTokens"])
            record["outputTokens"] += int(event["outputTokens"])
            record["seq"] = event["seq"]
            if event.get("estimated"):
                record["estimated"] = True
            if "firstTokenMs" in event and "firstTokenMs" not in record:
                record["firstTokenMs"] = int(event["firstTokenMs"])
            if "generationMs" in event:
                record["generationMs"] = record.get("generationMs", 0) + int(event["generationMs"])
        if event["seq"] <= self.seed_length:
            return  # inherited verbatim from the parent, which already counted it
        self.input_tokens += int(event["inputTokens"])
        self.output_tokens += int(event["outputTokens"])

    def _legacy(self, event: dict[str, Any], turn: Turn | None) -> None:
        """Imported history: messages outside any turn (the tracker counts them)."""
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

    # What the projection builds on top of the turn rules, per event type.
    _HOOKS: ClassVar[Mapping[str, Hook]] = {
        EventType.MESSAGE_USER.value: _user,
        EventType.MESSAGE_ASSISTANT.value: _assistant,
        EventType.MESSAGE_DELTA.value: _assistant_delta,
        EventType.TURN_END.value: _turn_end,
        EventType.SESSION_CREATED.value: _created,
        EventType.SESSION_TITLE.value: _title,
        EventType.SESSION_CONFIG.value: _config,
        EventType.SESSION_MERGE.value: _merge,
        EventType.SESSION_FORK.value: _fork,
        EventType.SESSION_CHILD.value: _child,
        EventType.TOOL_CALL.value: _tool_call,
        EventType.TOOL_RESULT.value: _tool_result,
        EventType.CHECKPOINT.value: _checkpoint,
        EventType.USAGE.value: _usage,
        EventType.LEGACY_IMPORT.value: _legacy,
    }
