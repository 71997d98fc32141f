"""Wire constants and validation shared by the server and the client."""

from __future__ import annotations

from typing import Any

from branchwise.core.errors import InvalidRequest

CAP_FORK_TARGETS = "session-fork-targets-v1"
CAP_FORK = "session-fork-v1"
CAPABILITIES = (CAP_FORK_TARGETS, CAP_FORK)
MAX_BODY = 16 * 1024
MAX_REQUEST_LINE = 8 * 1024
MAX_HEADER_FIELD = 8190  # aiohttp's default; differs from the line's so a refusal says which
EXPECTED_SESSION_HEADER = "X-Expected-Session"


FORK_FIELDS: dict[str, type] = {
    "sourceSessionId": str,
    "turnId": str,
    "boundarySequence": int,
    "expectedGeneration": int,
    "operationId": str,
}


def validate_fork_body(body: object) -> dict[str, Any]:
    """Check a ``POST /fork-session`` body: exactly the known fields, right types."""
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object")
    unknown = sorted(set(body) - set(FORK_FIELDS))
    if unknown:
        raise InvalidRequest(f"unknown fields: {', '.join(unknown)}")
    for name, kind in FORK_FIELDS.items():
        value = body.get(name)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise InvalidRequest(f"{name} must be a {kind.__name__}", field=name)
    return body
