"""Wire constants and validation shared by the server and the client."""

from __future__ import annotations

from typing import Any

from branchwise.core.errors import InvalidEvent, InvalidRequest
from branchwise.core.projection.attachments import AttachmentRef

CAP_FORK_TARGETS = "session-fork-targets-v1"
CAP_FORK = "session-fork-v1"
CAP_LIST = "sessions-list-v1"  # GET /sessions
CAP_CREATE = "session-create-v1"  # POST /sessions
CAP_READ = "session-read-v1"  # GET /sessions/{id}, paged
CAP_EVENTS = "session-events-v1"  # GET /sessions/{id}/events?after=SEQ (long-poll)
CAP_TURNS = "session-turns-v1"  # POST /sessions/{id}/turns (NDJSON stream)
CAP_STOP = "session-stop-v1"  # POST /sessions/{id}/stop
CAP_LINEAGE = "session-lineage-v1"  # GET /sessions/{id}/lineage and /tree
CAP_RENAME = "session-rename-v1"  # POST /sessions/{id}/title
CAP_TRASH = "session-trash-v1"  # POST /sessions/{id}/trash and /restore
CAP_SEARCH = "search-v1"  # GET /search?q=TEXT[&limit=N]
CAP_FORK_TITLE = "session-fork-title-v1"  # POST /fork-session takes an optional "title"
# POST /fork-session takes an optional "origin" (an edit's or a regenerate's prompt, "turnId"
# null at the start), and POST /sessions/{id}/turns takes {"answer": true} to ask it.
CAP_FORK_ORIGIN = "session-fork-origin-v1"
CAP_EVENTS_LAST_TURNS = "session-events-last-turns-v1"  # GET /sessions/{id}/events?lastTurns=K
# POST /attachments?name=NAME (the file's bytes as the body) stores a file and answers its
# reference; POST /sessions/{id}/turns takes "attachments": [reference, …];
# GET /attachments/{sha256} answers the bytes.
CAP_ATTACHMENTS = "attachments-v1"
CAP_LABEL = "session-label-v1"  # POST /sessions/{id}/label
CAP_MAP = "session-map-v1"  # GET /sessions/{id}/map: the family's branch map
# POST /sessions/{id}/fanout (NDJSON progress, then the result) and POST /sessions/{id}/fuse
CAP_FANOUT = "session-fanout-v1"
# POST /sessions/{id}/fanout takes "attachments": [reference, …], as a turn does.
CAP_FANOUT_ATTACHMENTS = "session-fanout-attachments-v1"
CAP_MODELS = "models-v1"  # GET /models: the chat models this server's turns are answered by
CAPABILITIES = (
    CAP_FORK_TARGETS,
    CAP_FORK,
    CAP_LIST,
    CAP_CREATE,
    CAP_READ,
    CAP_EVENTS,
    CAP_TURNS,
    CAP_STOP,
    CAP_LINEAGE,
    CAP_RENAME,
    CAP_TRASH,
    CAP_SEARCH,
    CAP_FORK_TITLE,
    CAP_FORK_ORIGIN,
    CAP_EVENTS_LAST_TURNS,
    CAP_ATTACHMENTS,
    CAP_LABEL,
    CAP_MAP,
    CAP_FANOUT,
    CAP_FANOUT_ATTACHMENTS,
    CAP_MODELS,
)
MAX_BODY = 16 * 1024
MAX_TURN_BODY = 1024 * 1024  # a prompt may be long; 1 MiB of JSON is plenty
MAX_PROMPT = 256 * 1024  # characters
MAX_ATTACHMENTS = 64  # references in one turn body
MAX_PAGE = 10_000  # turns per transcript page
MAX_TURN_INDEX = 2**63 - 1
MAX_WAIT = 60  # seconds a long-poll may hold
DEFAULT_WAIT = 20
EVENTS_POLL = 0.05  # seconds between looks at a session's files while long-polling
NDJSON = "application/x-ndjson"
MAX_REQUEST_LINE = 8 * 1024
MAX_HEADER_FIELD = 8190  # aiohttp's default; differs from the line's so a refusal says which
EXPECTED_SESSION_HEADER = "X-Expected-Session"
MAX_QUERY = 1000  # characters of a search query
MAX_FORK_TITLE = 1000  # characters of a new branch's title ("<title> (branch N)")


FORK_FIELDS: dict[str, type] = {
    "sourceSessionId": str,
    "turnId": str,
    "boundarySequence": int,
    "expectedGeneration": int,
    "operationId": str,
}


def validate_fork_body(body: object) -> dict[str, Any]:
    """Check a ``POST /fork-session`` body: exactly the known fields, right types.

    ``title`` (``session-fork-title-v1``) is optional: the new child's title,
    written as it is published; without it the child keeps its parent's.
    ``origin`` (``session-fork-origin-v1``) is optional: ``{"kind": "edit" |
    "regenerate", "turnId", "prompt"}``, the turn an edit or a regenerate asks
    again; the child is published with that prompt as its first own turn.
    With an origin, ``turnId`` may be ``null``: the fork is at the start
    (editing the first turn inherits nothing).
    """
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object")
    unknown = sorted(set(body) - set(FORK_FIELDS) - {"title", "origin"})
    if unknown:
        raise InvalidRequest(f"unknown fields: {', '.join(unknown)[:200]}")
    origin = body.get("origin")
    if origin is not None:
        _validate_origin(origin)
    for name, kind in FORK_FIELDS.items():
        value = body.get(name)
        if name == "turnId" and value is None and origin is not None:
            continue
        if not isinstance(value, kind) or isinstance(value, bool):
            raise InvalidRequest(f"{name} must be a {kind.__name__}", field=name)
    title = body.get("title")
    if title is not None and (not isinstance(title, str) or not title.strip()):
        raise InvalidRequest("title must be a str with some text", field="title")
    if title is not None and len(title) > MAX_FORK_TITLE:
        raise InvalidRequest(f"title is over {MAX_FORK_TITLE} characters", field="title")
    return body


def _validate_origin(origin: object) -> None:
    if not isinstance(origin, dict) or set(origin) != {"kind", "turnId", "prompt"}:
        raise InvalidRequest("origin must be {kind, turnId, prompt}", field="origin")
    if origin["kind"] not in ("edit", "regenerate"):
        raise InvalidRequest("origin.kind must be edit or regenerate", field="origin")
    prompt = origin["prompt"]
    if not isinstance(origin["turnId"], str) or not isinstance(prompt, str):
        raise InvalidRequest("origin.turnId and origin.prompt must be str", field="origin")
    if not prompt.strip() or len(prompt) > MAX_PROMPT:
        raise InvalidRequest("origin.prompt must have some text, not too much", field="origin")


def validate_new_session_body(body: object) -> dict[str, Any]:
    """Check a ``POST /sessions`` body: ``{}`` or ``{"title": str}``."""
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object")
    unknown = sorted(set(body) - {"title"})
    if unknown:
        raise InvalidRequest(f"unknown fields: {', '.join(unknown)[:200]}")
    if "title" in body and not isinstance(body["title"], str):
        raise InvalidRequest("title must be a str", field="title")
    return body


def validate_title_body(body: object) -> str:
    """Check a ``POST /sessions/{id}/title`` body: ``{"title": str}``; the title as given."""
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object")
    unknown = sorted(set(body) - {"title"})
    if unknown:
        raise InvalidRequest(f"unknown fields: {', '.join(unknown)[:200]}")
    title = body.get("title")
    if not isinstance(title, str):
        raise InvalidRequest("title must be a str", field="title")
    return title


def validate_label_body(body: object) -> str:
    """Check a ``POST /sessions/{id}/label`` body: ``{"label": str}``; the label as given."""
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object")
    unknown = sorted(set(body) - {"label"})
    if unknown:
        raise InvalidRequest(f"unknown fields: {', '.join(unknown)[:200]}")
    label = body.get("label")
    if not isinstance(label, str):
        raise InvalidRequest("label must be a str", field="label")
    return label


def validate_turn_body(body: object) -> dict[str, Any]:
    """Check a ``POST /sessions/{id}/turns`` body: ``{"text": str}``, not empty, not huge.

    ``{"answer": true}`` (``session-fork-origin-v1``) asks instead the question
    an edit's or a regenerate's branch was published with.
    """
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object")
    unknown = sorted(set(body) - {"text", "answer", "attachments"})
    if unknown:
        raise InvalidRequest(f"unknown fields: {', '.join(unknown)[:200]}")
    if "answer" in body:
        if body["answer"] is not True or "text" in body:
            raise InvalidRequest("answer must be true, without text", field="answer")
        return body
    text = body.get("text")
    if not isinstance(text, str):
        raise InvalidRequest("text must be a str", field="text")
    if not text.strip():
        raise InvalidRequest("text must not be empty", field="text")
    if len(text) > MAX_PROMPT:
        raise InvalidRequest(f"text is over {MAX_PROMPT} characters", field="text")
    if "attachments" in body:
        body["attachments"] = turn_attachments(body["attachments"])
    return body


def turn_attachments(raw: object) -> tuple[AttachmentRef, ...]:
    """A turn's (or a fan-out's) ``attachments``: references the server stored
    (``POST /attachments``).

    Raises:
        InvalidRequest: not a list of references.
    """
    if not isinstance(raw, list) or len(raw) > MAX_ATTACHMENTS:
        raise InvalidRequest(
            f"attachments must be a list of at most {MAX_ATTACHMENTS} references",
            field="attachments",
        )
    try:
        return tuple(AttachmentRef.from_json(item) for item in raw)
    except InvalidEvent as exc:
        raise InvalidRequest(exc.message, field="attachments") from None


def validate_fanout_body(body: object) -> dict[str, Any]:
    """Check a ``POST /sessions/{id}/fanout`` body.

    ``{"prompt": str, "models": [str…], "samples": int | null, "operationId": str,
    "attachments"?: [reference…]}`` (the references checked as a turn's,
    :func:`turn_attachments`); how many targets that makes is the fan-out's
    own check (``invalid_fanout``).
    """
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object")
    unknown = sorted(set(body) - {"prompt", "models", "samples", "operationId", "attachments"})
    if unknown:
        raise InvalidRequest(f"unknown fields: {', '.join(unknown)[:200]}")
    prompt, models, samples = body.get("prompt"), body.get("models", []), body.get("samples")
    if not isinstance(prompt, str) or len(prompt) > MAX_PROMPT:
        raise InvalidRequest(f"prompt must be a str of at most {MAX_PROMPT}", field="prompt")
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise InvalidRequest("models must be a list of model names", field="models")
    if samples is not None and (not isinstance(samples, int) or isinstance(samples, bool)):
        raise InvalidRequest("samples must be a whole number", field="samples")
    if not isinstance(body.get("operationId"), str):
        raise InvalidRequest("operationId must be a string", field="operationId")
    return {**body, "models": models, "attachments": turn_attachments(body.get("attachments", []))}
