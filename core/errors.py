"""Typed errors with a stable wire ``code``.

Every refusal Branchwise makes is one of these: the ``code`` is what the CLI,
the HTTP API and the UI's reason lookup key on; ``message`` is for people and
is never parsed.
"""

from __future__ import annotations

from typing import Any


class BranchwiseError(Exception):
    """Base of every typed Branchwise error.

    Attributes:
        code: stable machine-readable reason (the wire code in DESIGN.md).
        message: human-readable explanation (English; the UI localizes by code).
        details: extra JSON-safe fields (seq, offset, ids) for the error payload.
    """

    code: str = "internal_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_json(self) -> dict[str, Any]:
        """The ``{"error": {...}}`` body shared by the CLI and the HTTP API."""
        return {"error": {"code": self.code, "message": self.message, **self.details}}


class InvalidSessionId(BranchwiseError):
    """A session id that is not of the strict form, so it could name another path."""

    code = "invalid_session_id"


class SessionNotFound(BranchwiseError):
    """No session with this id exists under the data root."""

    code = "session_not_found"


class SessionExists(BranchwiseError):
    """A session with this id already exists."""

    code = "session_exists"


class LeaseHeld(BranchwiseError):
    """Another writer (this or another process) holds the session's writer lease."""

    code = "lease_held"


class CorruptLog(BranchwiseError):
    """A bad frame is followed by good ones: corruption, not a torn tail.

    The session stays readable up to ``seq`` / ``offset`` and refuses writers;
    nothing is truncated.
    """

    code = "corrupt_log"


class UnsupportedFormat(BranchwiseError):
    """A manifest or frame of a newer format than this build understands."""

    code = "unsupported_format"


class InvalidManifest(BranchwiseError):
    """A manifest that does not parse or lacks required fields."""

    code = "invalid_manifest"


class InvalidFrame(BranchwiseError):
    """Bytes that are not a well-formed frame (raised by the pure decoder)."""

    code = "invalid_frame"


class InvalidEvent(BranchwiseError):
    """An event missing a required field or of an unknown type."""

    code = "invalid_event"


class DurabilityError(BranchwiseError):
    """``fsync`` failed: the commit is not durable and the writer is closed.

    Retrying fsync is unsafe on Linux (the dirty pages may already be dropped),
    so the writer refuses further appends; reopening recovers from disk.
    """

    code = "not_durable"


class DiskFull(BranchwiseError):
    """A write failed for lack of space; no part of the commit is visible."""

    code = "disk_full"


class WriterClosed(BranchwiseError):
    """The writer was closed, or poisoned by an earlier durability failure."""

    code = "writer_closed"


class ReadOnlySession(BranchwiseError):
    """A write was asked of a session opened read-only."""

    code = "read_only"
