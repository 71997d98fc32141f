"""What a fork click and a start-up recovery ended with: values the UI reads.

:class:`~branchwise.desktop.fork_ops.ForkCoordinator` returns these; they are
kept apart from the protocol so callers (the headless host, the tests) can
read an outcome without the machinery that produced it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from .journal import DroppedRecord

# Refusals meaning the record's source session is gone (reported as dropped).
SOURCE_GONE = frozenset({"source_not_found", "session_not_found"})


class BranchStatus(StrEnum):
    """How one click ended."""

    OPENED = "opened"
    REFUSED = "refused"
    UNCERTAIN = "uncertain"
    ATTACH_FAILED = "attach_failed"
    CHILD_MISSING = "child_missing"
    NOT_STARTED = "not_started"


@dataclass(frozen=True, slots=True)
class BranchOutcome:
    """The result of ``branch`` (clicks that joined share the same outcome).

    Attributes:
        status: how it ended.
        operation_id: the journalled operation (``None`` if none was started).
        child_session_id: the child, when one is known to exist.
        created: whether this operation's fork call created the child now.
        reason: the refusal code, or the uncertain / journal failure's code.
    """

    status: BranchStatus
    operation_id: str | None
    child_session_id: str | None = None
    created: bool = False
    reason: str | None = None

    @property
    def opened(self) -> bool:
        """Whether the child's tab is open and the operation acknowledged."""
        return self.status is BranchStatus.OPENED


@dataclass(frozen=True, slots=True)
class RecoverySummary:
    """What ``recover`` did with the records a previous run left.

    Attributes:
        opened: children opened (and their records acknowledged).
        still_pending: operation ids whose outcome is still unknown (kept).
        refused: ``(operation id, reason code)`` of definitively refused retries.
        attach_failed: children that exist but whose tab could not open (kept).
        dropped: records dropped for their shape or a missing session.
        moved_aside: where an unreadable journal was moved, if it was.
    """

    opened: tuple[str, ...] = ()
    still_pending: tuple[str, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()
    attach_failed: tuple[str, ...] = ()
    dropped: tuple[DroppedRecord, ...] = ()
    moved_aside: Path | None = None

    @property
    def count(self) -> int:
        """How many journalled operations were resumed."""
        return (
            len(self.opened) + len(self.still_pending) + len(self.refused) + len(self.attach_failed)
        )
