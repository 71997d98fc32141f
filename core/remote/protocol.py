"""Wire constants and validation shared by the server and the client."""

from __future__ import annotations

from typing import Any

from ..errors import BranchwiseError

CAP_FORK_TARGETS = "session-fork-targets-v1"
CAP_FORK = "session-fork-v1"
CAPABILITIES = (CAP_FORK_TARGETS, CAP_FORK)
MAX_BODY = 16 * 1024
EXPECTED_SESSION_HEADER = "X-Expected-Session"

# Refusals that are definitive (the same request will always get the same answer).
STATUS_FOR_CODE = {
    "invalid_request": 400,
    "invalid_session_id": 400,
    "invalid_fork_request": 400,
    "session_mismatch": 400,
    "unauthorized": 401,
    "not_found": 404,
    "source_not_found": 404,
    "session_not_found": 404,
    "unknown_turn": 404,
    "body_too_large": 413,
    "stale_source": 409,
    "operation_conflict": 409,
    "duplicate_child": 409,
    "turn_open": 409,
    "active_authority": 409,
    "boundary_not_atomic": 409,
    "unverifiable": 422,
}


class InvalidRequest(BranchwiseError):
    """A request body or header that does not validate."""

    code = "invalid_request"


class Unauthorized(BranchwiseError):
    """Missing or wrong bearer token."""

    code = "unauthorized"


class SessionMismatch(BranchwiseError):
    """``X-Expected-Session`` does not name the session in the path."""

    code = "session_mismatch"


class ServerUnsupported(BranchwiseError):
    """The server does not advertise ``session-fork-targets-v1``; there is no fallback."""

    code = "server_unsupported"


class RemoteUnavailable(BranchwiseError):
    """The server could not be reached, timed out, or sent an undecodable reply.

    The outcome of a request is unknown: a fork may or may not have happened.
    """

    code = "remote_unavailable"


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
