"""Where fork clicks are carried out, and how their failures are classified.

The coordinator (``branching.ForkCoordinator``) talks to a ``ForkBackend``: today the local
store, later a remote server over HTTP. Failures are classified generically so
both behave the same: a typed refusal whose code cannot change by retrying is
*definitive* (the journal record goes); a timeout, a disconnect, an
undecodable reply or any other exception is *uncertain* (the fork may have
happened, so the record stays and its operation id is reused).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Protocol

from branchwise.core.errors import BranchwiseError, InvalidSessionId
from branchwise.core.fork.engine import ForkResult, fork
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.journal import ForkRequest

Opener = Callable[[str], Awaitable[None]]
Checkpoint = Callable[[str], None]


class CrashPoint(StrEnum):
    """Named points of the protocol where tests stop the host (crash injection)."""

    PENDING_WRITTEN = "pending_written"
    FORK_STARTED = "fork_started"
    FORK_PUBLISHED = "fork_published"
    FORK_RETURNED = "fork_returned"
    COMPLETED_WRITTEN = "completed_written"
    TAB_OPENED = "tab_opened"
    ACKNOWLEDGED = "acknowledged"


class ForkBackend(Protocol):
    """Where forks happen: the local store, or later a remote server."""

    async def fork(self, request: ForkRequest, operation_id: str) -> ForkResult:
        """Fork idempotently per ``operation_id``; raise typed refusals."""
        ...

    async def session_exists(self, session_id: str) -> bool:
        """Whether a session exists (recovery drops records naming gone ones)."""
        ...


def no_checkpoint(point: str) -> None:
    """Production default: crash points are no-ops."""


class LocalForkBackend:
    """Forks in this machine's store, in a worker thread (fork does blocking IO).

    A thread cannot be cancelled, so a timed-out fork may still finish; calls
    with the same operation id are serialized so a retry waits for it and
    then gets the same child back instead of racing it.

    Args:
        store: the session store.
        checkpoint: crash-injection hook called before and after the fork.
    """

    def __init__(self, store: SessionStore, checkpoint: Checkpoint = no_checkpoint) -> None:
        self.store = store
        self._checkpoint = checkpoint
        self._guard = threading.Lock()
        self._op_locks: dict[str, threading.Lock] = {}

    async def fork(self, request: ForkRequest, operation_id: str) -> ForkResult:
        """Run the core fork for ``request`` under ``operation_id``."""
        self._checkpoint(CrashPoint.FORK_STARTED)
        result = await asyncio.to_thread(self._fork_blocking, request, operation_id)
        self._checkpoint(CrashPoint.FORK_PUBLISHED)
        return result

    def _fork_blocking(self, request: ForkRequest, operation_id: str) -> ForkResult:
        with self._guard:
            lock = self._op_locks.setdefault(operation_id, threading.Lock())
        with lock:
            return fork(
                self.store,
                request.source_session_id,
                request.turn_id,
                request.boundary_sequence,
                request.generation,
                operation_id,
            )

    async def session_exists(self, session_id: str) -> bool:
        """Whether the session is published in the store."""
        try:
            return await asyncio.to_thread(self.store.exists, session_id)
        except InvalidSessionId:
            return False


def failure_kind(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, ConnectionError):
        return "disconnected"
    if isinstance(exc, BranchwiseError):
        return exc.code
    if isinstance(exc, OSError):
        return "io_error"
    if isinstance(exc, ValueError):
        return "undecodable_reply"
    return "internal_error"


def describe_failure(exc: BaseException) -> str:
    message = exc.message if isinstance(exc, BranchwiseError) else str(exc)
    return f"{failure_kind(exc)}: {type(exc).__name__}: {message}" if message else failure_kind(exc)
