"""Branching: the fork coordinator and the outcomes it reports.

The fork click, end to end: journal, fork, tab, acknowledgement (see
docs/architecture.md, "A branch click").

``ForkCoordinator.branch`` runs the whole protocol for one click:

1. a ``pending`` record with a fresh operation id is durable in
   ``fork-operations.json`` before anything is written or sent;
2. the backend forks (locally in a worker thread, or remotely), naming the
   child as the ``namer`` says, so the child is published with its own title;
3. success is journalled as ``completed`` with the child id, then the opener
   shows the child, and only after that is the record removed;
4. an uncertain failure (timeout, disconnect, undecodable reply, internal
   error) keeps the record and says so; clicking the same target again reuses
   the operation id, so the retry returns the same child, never a second one;
5. a child whose tab cannot open is kept and named, and the next click on the
   same target opens that child;
6. a definitive typed refusal removes the record and shows the reason;
7. on start, ``recover`` resumes every record left over, with one notice.

Clicks on a target whose operation is in flight join it. Each click ends as
a :class:`BranchOutcome` (its :class:`BranchStatus`), and ``recover`` reports
a :class:`RecoverySummary`. No Qt here: the host passes an ``opener``
coroutine and the UI listens to the notice center.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from branchwise.core.errors import BranchwiseError, InvalidSessionId, SessionNotFound, error_class
from branchwise.core.fork.engine import ForkResult
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.ids import new_id, validate_session_id
from branchwise.desktop.host.backends import (
    Checkpoint,
    CrashPoint,
    ForkBackend,
    Opener,
    describe_failure,
    failure_kind,
    no_checkpoint,
)
from branchwise.desktop.host.journal import (
    DroppedRecord,
    JournalLoad,
    OperationRecord,
    OperationsJournal,
    OperationState,
)
from branchwise.desktop.host.notices import Level, NoticeAction, NoticeCenter

log = logging.getLogger(__name__)

#: Names the child a request would create (``None``: it keeps its parent's title).
Namer = Callable[[ForkRequest], str | None]


def no_name(request: ForkRequest) -> str | None:
    """Default namer: a new child keeps its parent's title."""
    return None


class ForkCoordinator:
    """Runs fork clicks and their crash recovery against one data root.

    Args:
        root: the data root (holds ``fork-operations.json``).
        backend: where forks happen.
        notices: the notice channel every outcome is posted to.
        opener: shows a session in a tab; raises if it cannot.
        namer: the title a new child gets, asked right before each fork
            attempt (a retry that finds the child leaves it as it is).
        checkpoint: crash-injection hook, called with a ``CrashPoint`` name.
        fork_timeout: seconds before a fork attempt counts as uncertain.
        clock: wall clock for record timestamps.
    """

    def __init__(
        self,
        root: Path,
        backend: ForkBackend,
        notices: NoticeCenter,
        opener: Opener,
        *,
        namer: Namer = no_name,
        checkpoint: Checkpoint = no_checkpoint,
        fork_timeout: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = Path(root)
        self.backend = backend
        self.notices = notices
        self.opener = opener
        self._namer = namer
        self._checkpoint = checkpoint
        self._fork_timeout = fork_timeout
        self._clock = clock
        self._journal = OperationsJournal(self.root, clock)
        self._loaded: JournalLoad | None = None
        self._unreported = False  # records dropped at load, not yet in a notice
        self._in_flight: dict[ForkRequest, asyncio.Task[BranchOutcome]] = {}

    # -- public API ----------------------------------------------------------

    async def branch(self, request: ForkRequest) -> BranchOutcome:
        """Run the whole branch-click protocol for one click (or join the one in flight).

        The steps are in docs/architecture.md, "A branch click".
        """
        return await asyncio.shield(self._start(request, recovering=False))

    def is_in_flight(self, request: ForkRequest) -> bool:
        """Whether an operation for this target is running (the UI disables it)."""
        return request in self._in_flight

    def records(self) -> tuple[OperationRecord, ...]:
        """The journalled operations, oldest first."""
        self._ensure_loaded()
        return self._journal.records()

    async def recover(self) -> RecoverySummary:
        """Resume every record a previous run left; post one summary notice."""
        loaded = self._ensure_loaded(report_dropped=False)
        opened: list[str] = []
        pending: list[str] = []
        refused: list[tuple[str, str]] = []
        failed: list[str] = []
        dropped: list[DroppedRecord] = list(loaded.dropped) if self._unreported else []
        self._unreported = False
        for record in self._journal.records():
            if self._journal.get(record.operation_id) is None:
                continue  # a click resolved it while recovery ran
            gone = await self._missing_child(record)
            if gone is not None:
                dropped.append(gone)
                await self._remove_quietly(record.operation_id)
                continue
            outcome = await asyncio.shield(self._start(record.request, recovering=True))
            if outcome.status is BranchStatus.NOT_STARTED:
                continue  # a click resolved it while recovery ran
            if outcome.status is BranchStatus.OPENED:
                opened.append(str(outcome.child_session_id))
            elif _names_a_gone_session(outcome.reason):
                dropped.append(DroppedRecord(record.operation_id, "source_missing", "source gone"))
            elif outcome.status is BranchStatus.REFUSED:
                refused.append((record.operation_id, str(outcome.reason)))
            elif outcome.status is BranchStatus.ATTACH_FAILED:
                failed.append(str(outcome.child_session_id))
            elif outcome.status is BranchStatus.CHILD_MISSING:
                dropped.append(DroppedRecord(record.operation_id, "child_missing", "child gone"))
            else:
                pending.append(record.operation_id)
        summary = RecoverySummary(
            tuple(opened),
            tuple(pending),
            tuple(refused),
            tuple(failed),
            tuple(dropped),
            loaded.moved_aside,
        )
        self._report_dropped(dropped)
        self._report_recovery(summary)
        return summary

    async def open_kept_child(self, child_session_id: str) -> bool:
        """Open a kept child from a notice's action; acknowledge its record.

        Returns whether the tab opened (a failure is posted as a notice).
        """
        self._ensure_loaded()
        for record in self._journal.records():
            if record.child_session_id == child_session_id:
                outcome = await asyncio.shield(self._start(record.request, recovering=False))
                return outcome.opened
        try:
            await self.opener(child_session_id)
        except Exception as exc:
            self._attach_failed(child_session_id, exc)
            return False
        return True

    # -- the protocol ----------------------------------------------------------

    def _start(self, request: ForkRequest, *, recovering: bool) -> asyncio.Task[BranchOutcome]:
        """The task running ``request``'s operation: the one in flight, or a new one.

        Recovery runs quietly (it posts one summary instead) and only resumes:
        it never starts a new operation.
        """
        task = self._in_flight.get(request)
        if task is None:
            task = asyncio.ensure_future(self._run_registered(request, recovering))
            task.add_done_callback(_retrieve)
            self._in_flight[request] = task
        return task

    async def _run_registered(self, request: ForkRequest, recovering: bool) -> BranchOutcome:
        try:
            return await self._run(request, quiet=recovering)
        finally:
            if self._in_flight.get(request) is asyncio.current_task():
                del self._in_flight[request]

    async def _run(self, request: ForkRequest, *, quiet: bool) -> BranchOutcome:
        self._ensure_loaded()
        record = self._journal.find(request)
        if record is None and quiet:
            return BranchOutcome(BranchStatus.NOT_STARTED, None, reason="resolved")
        if record is None:
            now = self._clock()
            record = OperationRecord(
                new_id("op"), request, OperationState.PENDING, created_at=now, updated_at=now
            )
            try:
                await asyncio.to_thread(self._journal.put, record)
            except OSError as exc:
                self._journal_failed(exc, started=False)
                return BranchOutcome(BranchStatus.NOT_STARTED, None, reason="journal_write_failed")
            self._checkpoint(CrashPoint.PENDING_WRITTEN)
        if record.state is OperationState.COMPLETED:
            return await self._open(record, created=False, quiet=quiet)
        return await self._fork(record, quiet)

    async def _fork(self, record: OperationRecord, quiet: bool) -> BranchOutcome:
        op = record.operation_id
        try:
            attempt = self.backend.fork(record.request, op, title=self._namer(record.request))
            if self._fork_timeout is not None:
                result = await asyncio.wait_for(attempt, self._fork_timeout)
            else:
                result = await attempt
            child = _reply_child(result)
        except Exception as exc:
            if isinstance(exc, BranchwiseError) and exc.definitive:
                await self._remove_quietly(op)
                if not quiet:
                    self.notices.post(
                        "fork_refused", Level.ERROR, detail=exc.message, reason=exc.code
                    )
                return BranchOutcome(BranchStatus.REFUSED, op, reason=exc.code)
            return await self._uncertain(record, exc, quiet)
        self._checkpoint(CrashPoint.FORK_RETURNED)
        completed = record.completed(child, self._clock())
        try:
            await asyncio.to_thread(self._journal.put, completed)
        except OSError as exc:
            # The child exists and the pending record still names its operation,
            # so a later retry finds it again; go on and show it.
            self._journal_failed(exc, started=True)
        self._checkpoint(CrashPoint.COMPLETED_WRITTEN)
        return await self._open(completed, created=bool(result.created), quiet=quiet)

    async def _uncertain(
        self, record: OperationRecord, exc: Exception, quiet: bool
    ) -> BranchOutcome:
        description = describe_failure(exc)
        log.warning("fork %s uncertain: %s", record.operation_id, description)
        try:
            await asyncio.to_thread(
                self._journal.put, record.with_error(description, self._clock())
            )
        except OSError:
            log.exception("could not note the uncertain failure in the journal")
        if not quiet:
            self.notices.post(
                "fork_uncertain", Level.WARNING, detail=description, operation=record.operation_id
            )
        return BranchOutcome(BranchStatus.UNCERTAIN, record.operation_id, reason=failure_kind(exc))

    async def _open(self, record: OperationRecord, *, created: bool, quiet: bool) -> BranchOutcome:
        op, child = record.operation_id, str(record.child_session_id)
        try:
            await self.opener(child)
        except Exception as exc:
            if isinstance(exc, BranchwiseError) and exc.code == "session_not_found":
                await self._remove_quietly(op)
                if not quiet:
                    self._report_dropped([DroppedRecord(op, "child_missing", exc.message)])
                return BranchOutcome(BranchStatus.CHILD_MISSING, op, child, reason="child_missing")
            if not quiet:
                self._attach_failed(child, exc)
            return BranchOutcome(BranchStatus.ATTACH_FAILED, op, child, created, "attach_failed")
        self._checkpoint(CrashPoint.TAB_OPENED)
        try:
            await asyncio.to_thread(self._journal.remove, op)
        except OSError as exc:
            self._journal_failed(exc, started=True)
        self._checkpoint(CrashPoint.ACKNOWLEDGED)
        if not quiet:
            self.notices.post("fork_created", Level.SUCCESS, child=child, created=created)
        return BranchOutcome(BranchStatus.OPENED, op, child, created)

    # -- helpers ---------------------------------------------------------------

    def _ensure_loaded(self, *, report_dropped: bool = True) -> JournalLoad:
        if self._loaded is None:
            self._loaded = self._journal.load()
            if self._loaded.was_reset:
                self.notices.post(
                    "journal_reset",
                    Level.WARNING,
                    detail=self._loaded.detail,
                    path=str(self._loaded.moved_aside or self._journal.path),
                    reason=self._loaded.reset_reason,
                )
            self._unreported = bool(self._loaded.dropped)
        if report_dropped and self._unreported:
            self._unreported = False
            self._report_dropped(list(self._loaded.dropped))
        return self._loaded

    async def _missing_child(self, record: OperationRecord) -> DroppedRecord | None:
        """A completed record whose child is gone: nothing to open, nothing to keep.

        Pending records need no such check: their retry is answered from the
        operation's reservation first (so a child made before the source was
        deleted is still found), and a gone source is a definitive refusal.
        """
        if record.state is not OperationState.COMPLETED:
            return None
        child = str(record.child_session_id)
        try:
            exists = await self.backend.session_exists(child)
        except Exception:
            log.exception("could not check session %s; resuming anyway", child)
            return None
        if exists:
            return None
        return DroppedRecord(record.operation_id, "child_missing", f"session {child} is gone")

    async def _remove_quietly(self, operation_id: str) -> None:
        try:
            await asyncio.to_thread(self._journal.remove, operation_id)
        except OSError as exc:
            self._journal_failed(exc, started=True)

    def _attach_failed(self, child: str, exc: Exception) -> None:
        self.notices.post(
            "fork_attach_failed",
            Level.ERROR,
            detail=describe_failure(exc),
            action=NoticeAction("open_session", child),
            child=child,
        )

    def _journal_failed(self, exc: OSError, *, started: bool) -> None:
        log.error("fork journal write failed: %s", exc)
        self.notices.post(
            "journal_write_failed",
            Level.ERROR,
            detail=describe_failure(exc),
            path=str(self._journal.path),
            started=started,
        )

    def _report_dropped(self, dropped: list[DroppedRecord]) -> None:
        if dropped:
            self.notices.post(
                "journal_record_dropped",
                Level.WARNING,
                detail="; ".join(f"{d.operation_id}: {d.detail}" for d in dropped),
                count=len(dropped),
                reason=dropped[0].reason,
            )

    def _report_recovery(self, summary: RecoverySummary) -> None:
        if summary.count == 0:
            return
        clean = summary.count == len(summary.opened)
        first_kept = summary.attach_failed[0] if summary.attach_failed else None
        self.notices.post(
            "fork_recovered",
            Level.SUCCESS if clean else Level.WARNING,
            action=NoticeAction("open_session", first_kept) if first_kept else None,
            count=summary.count,
            opened=len(summary.opened),
            pending=len(summary.still_pending),
            refused=len(summary.refused),
            failed=len(summary.attach_failed),
        )


class BranchClicks:
    """The branch clicks of one place conversations live, and which are being carried out.

    The one path a click takes, for local and server conversations alike:
    a second click on a turn whose branch is being created is ignored (its
    action shows "creation in flight"), the coordinator carries out the
    first, and the source's views hear before and after.

    Args:
        coordinator: the fork-operations journal of the source (asked each time:
            the host builds its own lazily).
        changed: called with the source conversation whose branch actions changed.
    """

    def __init__(
        self, coordinator: Callable[[], ForkCoordinator], changed: Callable[[str], object]
    ) -> None:
        self._coordinator = coordinator
        self._changed = changed
        self.in_flight: set[tuple[str, str]] = set()
        # Sources with a fork at the start under way (asking the first turn again):
        # it has no turn, so no row's action shows it, but a second click still waits.
        self._starting: set[str] = set()

    def is_in_flight(self, request: ForkRequest) -> bool:
        """A branch from this turn is being created right now."""
        if request.turn_id is None:
            return request.source_session_id in self._starting
        return (request.source_session_id, request.turn_id) in self.in_flight

    async def request(self, request: ForkRequest) -> BranchOutcome | None:
        """Carry out one click; ``None`` when one from the same turn is already under way."""
        if self.is_in_flight(request):
            return None
        self._mark(request, under_way=True)
        self._changed(request.source_session_id)
        try:
            return await self._coordinator().branch(request)
        finally:
            self._mark(request, under_way=False)
            self._changed(request.source_session_id)

    def _mark(self, request: ForkRequest, *, under_way: bool) -> None:
        source, turn = request.source_session_id, request.turn_id
        if turn is None:
            if under_way:
                self._starting.add(source)
            else:
                self._starting.discard(source)
        elif under_way:
            self.in_flight.add((source, turn))
        else:
            self.in_flight.discard((source, turn))


def _reply_child(result: ForkResult) -> str:
    """The child id of a reply; a malformed one is an undecodable reply, not a refusal."""
    try:
        return validate_session_id(result.child_session_id)
    except InvalidSessionId as exc:
        raise ValueError(f"the fork reply names a malformed child: {exc.message}") from exc


def _retrieve(task: asyncio.Task[BranchOutcome]) -> None:
    """Mark a task's exception retrieved: a crash in a joined click is re-raised to its callers."""
    if not task.cancelled():
        task.exception()


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


def _names_a_gone_session(code: str | None) -> bool:
    """Whether a refusal code says the record's source session no longer exists."""
    known = error_class(code) if code is not None else None
    return known is not None and issubclass(known, SessionNotFound)
