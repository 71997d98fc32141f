"""Typed refusals of the fork vocabulary (§3.1, §3.2).

A fork target's ``reason`` and the error a fork raises for it share one code,
so the UI localizes an unavailable target and a refused fork the same way.
"""

from __future__ import annotations

from enum import StrEnum

from .errors import BranchwiseError, SessionNotFound


class TargetReason(StrEnum):
    """Why a turn cannot be forked (the ``reason`` of an unavailable target)."""

    TURN_OPEN = "turn_open"
    ACTIVE_AUTHORITY = "active_authority"
    BOUNDARY_NOT_ATOMIC = "boundary_not_atomic"
    UNVERIFIABLE = "unverifiable"


class SourceNotFound(SessionNotFound):
    """The session to fork (or to list targets of) does not exist."""

    code = "source_not_found"


class StaleSource(BranchwiseError):
    """The request's generation or boundary no longer matches the source's log."""

    code = "stale_source"


class UnknownTurn(BranchwiseError):
    """No turn with this id in the source (never redirected to another turn)."""

    code = "unknown_turn"


class TurnOpen(BranchwiseError):
    """The turn has not ended, so it has no boundary to branch from."""

    code = "turn_open"


class ActiveAuthority(BranchwiseError):
    """The turn's closing commit leaves an interaction or tool call open."""

    code = "active_authority"


class BoundaryNotAtomic(BranchwiseError):
    """The cut would split a commit."""

    code = "boundary_not_atomic"


class Unverifiable(BranchwiseError):
    """Message-only history with no turn records: no boundary can be confirmed."""

    code = "unverifiable"


class DuplicateChild(BranchwiseError):
    """The requested child session id is already taken."""

    code = "duplicate_child"


class OperationConflict(BranchwiseError):
    """The operation id was already used for a different fork request."""

    code = "operation_conflict"


REFUSAL_FOR_REASON: dict[str, type[BranchwiseError]] = {
    TargetReason.TURN_OPEN: TurnOpen,
    TargetReason.ACTIVE_AUTHORITY: ActiveAuthority,
    TargetReason.BOUNDARY_NOT_ATOMIC: BoundaryNotAtomic,
    TargetReason.UNVERIFIABLE: Unverifiable,
}
