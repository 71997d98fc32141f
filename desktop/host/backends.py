"""Where fork clicks are carried out, and how their failures are classified.

The coordinator (``branching.ForkCoordinator``) talks to a ``ForkBackend``:
this machine's store (:class:`LocalForkBackend`) or a ``branchwise serve``
server over HTTP (:class:`RemoteForkBackend`, docs/cli.md "Serve"). Both take core's
:class:`~branchwise.core.fork.operations.ForkRequest`, as the click carried it
and the journal stored it. Failures are
classified generically so both behave the same: a typed refusal whose code
cannot change by retrying is *definitive* (the journal record goes); a
timeout, a disconnect, an undecodable reply or any other exception is
*uncertain* (the fork may have happened, so the record stays and its
operation id is reused).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Protocol

from branchwise.core.conversation.names import new_branch_label_from_store
from branchwise.core.errors import (
    BranchwiseError,
    InvalidSessionId,
    RemoteRefusal,
    ServerUnsupported,
    SessionNotFound,
    error_class,
)
from branchwise.core.fork.engine import ForkResult, fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.ids import validate_session_id
from branchwise.core.remote.client import RemoteStore
from branchwise.core.remote.protocol import CAP_FORK_ORIGIN, CAP_FORK_TITLE
from branchwise.core.store.store import SessionStore

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
    """Where forks happen: the local store, or a remote server."""

    async def fork(
        self, request: ForkRequest, operation_id: str, *, title: str | None = None
    ) -> ForkResult:
        """Fork idempotently per ``operation_id``; raise typed refusals.

        ``title`` names a child this call creates (a retry that finds the
        operation's child returns it untouched).
        """
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

    async def fork(
        self, request: ForkRequest, operation_id: str, *, title: str | None = None
    ) -> ForkResult:
        """Run the core fork of ``request`` under ``operation_id``; a new child is ``title``."""
        self._checkpoint(CrashPoint.FORK_STARTED)
        result = await asyncio.to_thread(self._fork_blocking, request, operation_id, title)
        self._checkpoint(CrashPoint.FORK_PUBLISHED)
        return result

    def _fork_blocking(
        self, request: ForkRequest, operation_id: str, title: str | None
    ) -> ForkResult:
        with self._guard:
            lock = self._op_locks.setdefault(operation_id, threading.Lock())
        with lock:
            label, turn = new_branch_label_from_store(
                self.store, request.source_session_id, request.turn_id, request.origin
            )
            return fork(
                self.store, request, operation_id, title=title, label=label, fork_turn_index=turn
            )

    async def session_exists(self, session_id: str) -> bool:
        """Whether the session is published in the store."""
        try:
            return await asyncio.to_thread(self.store.exists, session_id)
        except InvalidSessionId:
            return False


def remote_fork_fields(request: ForkRequest) -> tuple[str, str | None, int, int]:
    """``(source, turn, boundary sequence, expected generation)`` of a request.

    The one place a request is mapped onto ``POST /fork-session``'s fields.
    """
    return (
        request.source_session_id,
        request.turn_id,
        request.boundary_sequence,
        request.expected_generation,
    )


class RemoteForkBackend:
    """Forks on a ``branchwise serve`` server (docs/cli.md, "Serve"), with no local fallback.

    Before its first request it checks that the server advertises
    ``session-fork-targets-v1``; a server that does not raises
    :class:`~branchwise.core.errors.ServerUnsupported` (a definitive refusal:
    nothing was forked) on every call, and the host turns its branch actions
    off. Refusals come back as ``RemoteRefusal`` with the server's own code
    and definitiveness; timeouts, disconnects and undecodable replies are
    ``RemoteUnavailable`` (uncertain: the journal keeps its record).

    Args:
        remote: the server's client.
    """

    def __init__(self, remote: RemoteStore) -> None:
        self.remote = remote
        self._supported = False
        self._takes_titles = False
        self._takes_origins = False

    def __repr__(self) -> str:
        return f"RemoteForkBackend({self.remote.base_url!r})"

    async def check_support(self) -> None:
        """Ask the server's capabilities (once it has answered yes, never again).

        Raises:
            ServerUnsupported: the server cannot list fork targets.
            RemoteUnavailable: it could not be asked.
        """
        if not self._supported:
            capabilities = await self.remote.require_fork_targets()
            self._takes_titles = CAP_FORK_TITLE in capabilities
            self._takes_origins = CAP_FORK_ORIGIN in capabilities
            self._supported = True

    async def fork(
        self, request: ForkRequest, operation_id: str, *, title: str | None = None
    ) -> ForkResult:
        """``POST /fork-session``; the server answers a repeated operation id with its child.

        ``title`` goes with the request to a server that advertises
        ``session-fork-title-v1``, which publishes the child with it; an older
        server has no field for it, so there the branch keeps its parent's
        title until renamed.
        """
        await self.check_support()
        asks_again = request.origin is not None or request.turn_id is None
        if asks_again and not self._takes_origins:
            # Without session-fork-origin-v1 there is no field for a prompt or a fork at
            # the start: a plain fork there would make a branch without the edited prompt.
            raise ServerUnsupported(
                "this server cannot branch an edited or regenerated prompt",
                operationId=operation_id,
            )
        named = title if self._takes_titles else None
        return await self.remote.fork(
            *remote_fork_fields(request), operation_id, named, request.origin
        )

    async def session_exists(self, session_id: str) -> bool:
        """Whether the server has the session (its fork-targets answer, or not-found)."""
        try:
            validate_session_id(session_id)
        except InvalidSessionId:
            return False
        await self.check_support()
        try:
            await self.remote.fork_targets(session_id)
        except RemoteRefusal as exc:
            known = error_class(exc.code)
            if known is not None and issubclass(known, SessionNotFound):
                return False
            raise
        return True


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
