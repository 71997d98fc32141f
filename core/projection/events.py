"""The event vocabulary of the session log (docs/storage.md, "Events").

Events are stored as plain dicts (``seq``, ``type``, ``ts`` plus fields) so the
replay path stays as cheap as decoding JSON. This module names every type,
lists each type's required fields, validates events before they are
committed, and offers small constructors so callers never spell a type twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from branchwise.core.errors import InvalidEvent
from branchwise.core.projection.attachments import AttachmentRef, attachments_of

Event = dict[str, Any]


class EventType(StrEnum):
    """Every event type a log may hold."""

    SESSION_CREATED = "session/created"
    SESSION_FORK = "session/fork"
    SESSION_CHILD = "session/child"
    SESSION_TITLE = "session/title"
    SESSION_CONFIG = "session/config"
    SESSION_MERGE = "session/merge"
    TURN_START = "turn/start"
    TURN_END = "turn/end"
    MESSAGE_USER = "message/user"
    MESSAGE_ASSISTANT = "message/assistant"
    MESSAGE_DELTA = "message/delta"
    STEP_START = "step/start"
    STEP_END = "step/end"
    TOOL_CALL = "tool/call"
    TOOL_RESULT = "tool/result"
    INTERACTION_REQUEST = "interaction/request"
    INTERACTION_RESOLVE = "interaction/resolve"
    CHECKPOINT = "checkpoint"
    USAGE = "usage"
    LEGACY_IMPORT = "legacy/import"


UNTIMED_EVENTS = frozenset({EventType.MESSAGE_DELTA.value})
"""The event types the log writer stamps without ``ts``: a streaming answer's deltas.

Hundreds of partial commits store a few hundred bytes of text each; a
timestamp nobody reads (the answer's time is its closing commit's) would be a
fifth of them (a streamed answer costs at most 2.5× its size; docs/performance.md).
"""


class EndReason(StrEnum):
    """Why a turn ended; every turn ends with exactly one."""

    COMPLETED = "completed"
    CANCELLED = "cancelled"
    ERROR = "error"
    INTERRUPTED = "interrupted"


REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    EventType.SESSION_CREATED: ("title", "kind"),
    EventType.SESSION_FORK: (
        "parentSessionId",
        "parentGeneration",
        "turnId",
        "boundarySequence",
        "seedLength",
        "operationId",
    ),
    EventType.SESSION_CHILD: ("parentSessionId", "childSessionId", "rootSessionId", "spawnedFrom"),
    EventType.SESSION_TITLE: ("title",),
    EventType.SESSION_CONFIG: ("model", "system", "temperature"),
    EventType.SESSION_MERGE: (
        "childSessionId",
        "childBoundarySequence",
        "operationId",
        "content",
        "kind",
    ),
    EventType.TURN_START: ("turnId",),
    EventType.TURN_END: ("turnId", "reason"),
    EventType.MESSAGE_USER: ("messageId", "content"),
    EventType.MESSAGE_ASSISTANT: ("messageId", "content", "model"),
    EventType.MESSAGE_DELTA: ("delta",),
    EventType.STEP_START: ("stepId",),
    EventType.STEP_END: ("stepId",),
    EventType.TOOL_CALL: ("callId", "name", "args"),
    EventType.TOOL_RESULT: ("callId", "output"),
    EventType.INTERACTION_REQUEST: ("interactionId", "kind"),
    EventType.INTERACTION_RESOLVE: ("interactionId",),
    EventType.CHECKPOINT: ("checkpointId", "blobs"),
    EventType.USAGE: ("inputTokens", "outputTokens", "model"),
    EventType.LEGACY_IMPORT: ("messages",),
}


def validate_event(event: Event) -> Event:
    """Check an event's type, required fields and end reason before it is committed.

    Raises:
        InvalidEvent: unknown type, missing field, or bad end reason.
    """
    kind = event.get("type")
    required = REQUIRED_FIELDS.get(kind) if isinstance(kind, str) else None
    if required is None:
        raise InvalidEvent(f"unknown event type {kind!r}")
    missing = [name for name in required if name not in event]
    if missing:
        raise InvalidEvent(f"{kind} is missing {', '.join(missing)}")
    if kind == EventType.TURN_END and event["reason"] not in EndReason.__members__.values():
        raise InvalidEvent(f"unknown turn end reason {event['reason']!r}")
    if kind == EventType.MESSAGE_DELTA:
        if not isinstance(event["delta"], str):
            raise InvalidEvent("message/delta needs its delta as text")
        if ("messageId" in event) != ("model" in event) or not all(
            isinstance(event.get(name, ""), str) for name in ("messageId", "model")
        ):
            raise InvalidEvent("an opening message/delta names its messageId and model as text")
    if kind == EventType.MESSAGE_USER and "attachments" in event:
        attachments_of(event)
    if "seq" in event or "ts" in event:
        raise InvalidEvent("seq and ts are assigned by the log, not by callers")
    return event


def session_created(
    title: str, kind: str = "root", source: Mapping[str, str] | None = None
) -> Event:
    """First event of every session; ``source`` names an imported one's origin (format, id)."""
    event: Event = {"type": EventType.SESSION_CREATED.value, "title": title, "kind": kind}
    if source is not None:
        event["source"] = dict(source)
    return event


def session_title(title: str) -> Event:
    """The session's new title."""
    return {"type": EventType.SESSION_TITLE.value, "title": title}


def session_fork(
    *,
    parent_session_id: str,
    parent_generation: int,
    turn_id: str | None,
    boundary_sequence: int,
    operation_id: str,
    source: Mapping[str, str] | None = None,
    origin: Mapping[str, Any] | None = None,
) -> Event:
    """A fork's first own event: the parent it inherits from and where it was cut.

    The cut inherits exactly the parent's events through ``boundary_sequence``,
    so the seed length is the boundary. ``source`` names an imported fork's
    origin; ``origin`` the edit or regenerate it was made for
    (``{"kind", "turnId"}``).
    """
    event: Event = {
        "type": EventType.SESSION_FORK.value,
        "parentSessionId": parent_session_id,
        "parentGeneration": parent_generation,
        "turnId": turn_id,
        "boundarySequence": boundary_sequence,
        "seedLength": boundary_sequence,
        "operationId": operation_id,
    }
    if source is not None:
        event["source"] = dict(source)
    if origin is not None:
        event["origin"] = dict(origin)
    return event


def session_child(
    *,
    parent_session_id: str,
    child_session_id: str,
    root_session_id: str,
    spawned_from: Mapping[str, Any],
) -> Event:
    """The link between a parent and a child it spawned, written identically into both logs.

    ``spawned_from`` is ``{"turnId": …, "toolCallId"?: …}`` (the turn may be ``None``).
    """
    return {
        "type": EventType.SESSION_CHILD.value,
        "parentSessionId": parent_session_id,
        "childSessionId": child_session_id,
        "rootSessionId": root_session_id,
        "spawnedFrom": dict(spawned_from),
    }


def session_config(
    model: str | None,
    system: str | None,
    temperature: float | None,
    model_server: str | None = None,
) -> Event:
    """The conversation's own model, system prompt, temperature and model server.

    ``None`` means as in Settings; ``modelServer`` is written only when set,
    so the event reads as before without it.
    """
    event: Event = {
        "type": EventType.SESSION_CONFIG.value,
        "model": model,
        "system": system,
        "temperature": temperature,
    }
    if model_server is not None:
        event["modelServer"] = model_server
    return event


def session_merge(
    *,
    child_session_id: str,
    child_boundary_sequence: int,
    operation_id: str,
    content: str,
    kind: str,
    sources: Sequence[Mapping[str, str]] | None = None,
    model: str | None = None,
    instruction: str | None = None,
) -> Event:
    """What a branch brought back into this conversation (``answer``, ``summary`` or ``note``).

    A ``fused`` merge (a fan-out's answers combined into one) also records
    its provenance: ``sources`` (each ``{"sessionId", "turnId",
    "messageId", "model"}`` it combined), the ``model`` that wrote it and the
    ``instruction`` it was given. Readers older than these fields see an
    ordinary merge from the first source.
    """
    event: Event = {
        "type": EventType.SESSION_MERGE.value,
        "childSessionId": child_session_id,
        "childBoundarySequence": child_boundary_sequence,
        "operationId": operation_id,
        "content": content,
        "kind": kind,
    }
    if sources is not None:
        event["sources"] = [dict(source) for source in sources]
    if model is not None:
        event["model"] = model
    if instruction is not None:
        event["instruction"] = instruction
    return event


def turn_start(turn_id: str) -> Event:
    """Opens a turn."""
    return {"type": EventType.TURN_START.value, "turnId": turn_id}


def turn_end(turn_id: str, reason: EndReason | str, error: str | None = None) -> Event:
    """Closes a turn, whatever the reason; ``error`` carries a failure's text."""
    event: Event = {"type": EventType.TURN_END.value, "turnId": turn_id, "reason": str(reason)}
    if error is not None:
        event["error"] = error
    return event


def user_message(
    message_id: str, content: str, attachments: tuple[AttachmentRef, ...] = ()
) -> Event:
    """What the user said, with the files attached to it (referenced by hash, never inline).

    ``attachments`` is written only when there are some, so a message without
    any is the same event older builds wrote and read.
    """
    event: Event = {
        "type": EventType.MESSAGE_USER.value,
        "messageId": message_id,
        "content": content,
    }
    if attachments:
        event["attachments"] = [item.to_json() for item in attachments]
    return event


def assistant_message(message_id: str, content: str, model: str, *, partial: bool = False) -> Event:
    """A step's assistant text; ``partial`` marks a mid-stream checkpoint of it."""
    event: Event = {
        "type": EventType.MESSAGE_ASSISTANT.value,
        "messageId": message_id,
        "content": content,
        "model": model,
    }
    if partial:
        event["partial"] = True
    return event


def assistant_delta(delta: str, opening: tuple[str, str] | None = None) -> Event:
    """The text a streaming answer gained since its previous partial commit (format 2).

    A partial commit used to store the whole answer so far, so a long answer
    streamed over minutes wrote a quadratic amount (a 120 KB answer in 600
    commits wrote 36 MB). A ``message/delta`` stores only what is new, and as
    little else as a commit can: the first delta of an answer (``opening``:
    its message id and model) names the message; each later one continues
    the answer its open turn is streaming (the turn's ``messageId``); the log
    writer stamps no ``ts`` on deltas. A replay concatenates them after the
    last whole text of the message; the closing commit's
    :func:`assistant_message` still holds the whole answer. A commit holding
    a delta is framed as version 2 (:mod:`~branchwise.core.log.frames`), so a
    build that predates deltas refuses the log instead of showing a
    shortened answer.
    """
    event: Event = {"type": EventType.MESSAGE_DELTA.value}
    if opening is not None:
        event["messageId"], event["model"] = opening
    event["delta"] = delta
    return event


def step_start(step_id: str) -> Event:
    """Opens one model call inside a turn."""
    return {"type": EventType.STEP_START.value, "stepId": step_id}


def step_end(step_id: str) -> Event:
    """Closes one model call."""
    return {"type": EventType.STEP_END.value, "stepId": step_id}


def tool_call(call_id: str, name: str, args: Any) -> Event:
    """A tool the answer called, with its arguments (any JSON value)."""
    return {"type": EventType.TOOL_CALL.value, "callId": call_id, "name": name, "args": args}


def tool_result(call_id: str, output: str, name: str | None = None) -> Event:
    """What a tool call returned; ``name`` repeats the tool's name when the source gives it."""
    event: Event = {"type": EventType.TOOL_RESULT.value, "callId": call_id, "output": output}
    if name is not None:
        event["name"] = name
    return event


def usage(
    input_tokens: int,
    output_tokens: int,
    model: str,
    *,
    estimated: bool = False,
    first_token_ms: int | None = None,
    generation_ms: int | None = None,
) -> Event:
    """Token usage of a model call (a fork inherits it but never counts it again).

    ``estimated`` marks counts the runner estimated because the server sent
    none; ``first_token_ms`` and ``generation_ms`` are the runner's timings
    (see :mod:`~branchwise.core.projection.figures`). Each is written only
    when set, so older logs, which have none of them, read as before.
    """
    event: Event = {
        "type": EventType.USAGE.value,
        "inputTokens": input_tokens,
        "outputTokens": output_tokens,
        "model": model,
    }
    if estimated:
        event["estimated"] = True
    if first_token_ms is not None:
        event["firstTokenMs"] = first_token_ms
    if generation_ms is not None:
        event["generationMs"] = generation_ms
    return event
