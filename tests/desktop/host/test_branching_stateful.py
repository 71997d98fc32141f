"""Property: any interleaving of clicks, crashes, restarts and failures is safe.

The machine drives a real coordinator over a real store and journal. A crash
is simulated by raising at an injected crash point (the exception escapes the
protocol the way a killed process stops it) and then building a new
coordinator from what is on disk. Whatever happens:

- one operation id has at most one child;
- no created child is lost: each is open or named by a journal record;
- the journal on disk is the coordinator's view of it.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

from helpers.forking import (
    RemoteDouble,
    Tabs,
    children_per_operation,
    fork_children,
    make_source,
    request_for,
)
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from branchwise.core.fork.operations import ForkRequest
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.backends import CrashPoint, LocalForkBackend
from branchwise.desktop.host.branching import BranchOutcome, BranchStatus, ForkCoordinator
from branchwise.desktop.host.journal import OperationState, read_journal_document
from branchwise.desktop.host.notices import NoticeCenter


class SimulatedCrash(BaseException):
    """The process "dies" here: nothing after this point of the protocol runs."""


TROUBLE = st.sampled_from(["ok", "ok", "ok", "lost_reply", "refuse_reset", "garbled"])


class ForkProtocolMachine(RuleBasedStateMachine):
    """Clicks, double clicks, crashes, restarts, recoveries and attach failures."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="branchwise-stateful-"))
        self.store = SessionStore(self.tmp / "root")
        source = make_source(self.store, turns=2)
        good = [request_for(self.store, source, i) for i in (0, 1)]
        stale = ForkRequest(source.session_id, good[0].turn_id, good[0].boundary_sequence, 9)
        self.requests = [*good, stale]
        self.loop = asyncio.new_event_loop()
        # Tabs survive a crash the way the crash tests' host process's open-tabs file does.
        self.tabs = Tabs(store=self.store)
        self.crash_at: str | None = None
        self.crashes = 0
        self._start_host()

    def _start_host(self) -> None:
        self.notices = NoticeCenter()
        self.backend = RemoteDouble(LocalForkBackend(self.store, checkpoint=self._checkpoint))
        self.coordinator = ForkCoordinator(
            self.store.root,
            self.backend,
            self.notices,
            self.tabs.open,
            checkpoint=self._checkpoint,
        )

    def _checkpoint(self, point: str) -> None:
        if point == self.crash_at:
            self.crash_at = None
            raise SimulatedCrash(point)

    def _run(self, coro: Any) -> Any:
        """Run ``coro``; on a simulated crash, restart the host from disk."""
        try:
            return self.loop.run_until_complete(coro)
        except SimulatedCrash as crash:
            event(f"crashed at {crash}")
            self.crashes += 1
            self._start_host()
            return None
        finally:
            self.crash_at = None

    def teardown(self) -> None:
        self.loop.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- rules ---------------------------------------------------------------------

    @rule(which=st.integers(0, 2), trouble=TROUBLE, attach_fails=st.booleans())
    def click(self, which: int, trouble: str, attach_fails: bool) -> None:
        self.backend.script = [trouble]
        self.tabs.failures_left = int(attach_fails)
        outcome: BranchOutcome = self._run(self.coordinator.branch(self.requests[which]))
        self.tabs.failures_left = 0
        if outcome.status is BranchStatus.OPENED:
            assert outcome.child_session_id in self.tabs.opened
        if which == 2 and trouble != "refuse_reset":  # stale: refused once the server hears it
            assert outcome.status is BranchStatus.REFUSED

    @rule(which=st.integers(0, 1), point=st.sampled_from(list(CrashPoint)), trouble=TROUBLE)
    def crash_during_click(self, which: int, point: CrashPoint, trouble: str) -> None:
        self.backend.script = [trouble]
        self.crash_at = point
        self._run(self.coordinator.branch(self.requests[which]))

    @rule(which=st.integers(0, 1))
    def double_click(self, which: int) -> None:
        request = self.requests[which]
        calls_before = len(self.backend.calls)

        async def both() -> tuple[BranchOutcome, BranchOutcome]:
            first, second = await asyncio.gather(
                self.coordinator.branch(request), self.coordinator.branch(request)
            )
            return first, second

        first, second = self._run(both())
        assert first == second
        assert len(self.backend.calls) - calls_before <= 1  # the second click sent nothing

    @rule(point=st.none() | st.sampled_from(list(CrashPoint)), attach_fails=st.booleans())
    def restart_and_recover(self, point: CrashPoint | None, attach_fails: bool) -> None:
        self._start_host()
        self.tabs.failures_left = int(attach_fails)
        self.crash_at = point
        summary = self._run(self.coordinator.recover())
        self.tabs.failures_left = 0
        if summary is not None:
            recovered = [n for n in self.notices.history if n.code == "fork_recovered"]
            assert len(recovered) == (1 if summary.count else 0)

    @rule()
    def open_kept_child_from_notice(self) -> None:
        actions = [n.action for n in self.notices.history if n.action is not None]
        if actions:
            self._run(self.coordinator.open_kept_child(actions[-1].session_id))

    # -- invariants ---------------------------------------------------------------

    def _journal(self) -> list[dict[str, Any]]:
        document = read_journal_document(self.store.root)
        return [] if document is None else list(document["operations"])

    @invariant()
    def one_operation_at_most_one_child(self) -> None:
        per_op = children_per_operation(self.store)
        assert all(count == 1 for count in per_op.values()), per_op

    @invariant()
    def no_created_child_is_lost(self) -> None:
        journal = self._journal()
        pending_ops = {r["operationId"] for r in journal if r["state"] == "pending"}
        kept = {r["childSessionId"] for r in journal if r["state"] == "completed"}
        for child in fork_children(self.store):
            assert (
                child.session_id in self.tabs.opened
                or child.session_id in kept
                or child.created_by_operation in pending_ops
            ), child

    @invariant()
    def disk_and_memory_agree(self) -> None:
        on_disk = {r["operationId"]: r["state"] for r in self._journal()}
        in_memory = {r.operation_id: r.state.value for r in self.coordinator.records()}
        assert on_disk == in_memory

    @invariant()
    def one_record_per_target(self) -> None:
        """A second click on a target reuses its record instead of adding one."""
        requests = [r["requestHash"] for r in self._journal()]
        assert len(requests) == len(set(requests))

    @invariant()
    def completed_records_name_existing_children(self) -> None:
        for record in self.coordinator.records():
            if record.state is OperationState.COMPLETED:
                assert self.store.exists(str(record.child_session_id))


ForkProtocolMachine.TestCase.settings = settings(
    max_examples=80,
    stateful_step_count=16,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestForkProtocol = ForkProtocolMachine.TestCase
