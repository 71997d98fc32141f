"""The server's group commit of forks: a lone fork goes at once, the rest go together."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers.forking import children_per_operation, make_source, request_for

from branchwise.core.errors import BranchwiseError
from branchwise.core.fork import engine
from branchwise.core.fork.engine import ForkCall, ForkResult
from branchwise.core.fork.targets import TargetsCache
from branchwise.core.remote import fork_groups
from branchwise.core.remote.fork_groups import ForkGroups
from branchwise.core.store.store import SessionStore


@dataclass
class Groups:
    """The size of every group made durable, and a gate that holds each one until opened."""

    sizes: list[int] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)

    async def running(self, count: int) -> None:
        """Wait until ``count`` groups have started."""
        while len(self.sizes) < count:
            await asyncio.sleep(0.001)


@pytest.fixture
def groups(monkeypatch: pytest.MonkeyPatch) -> Groups:
    """The server's groups, recorded; each waits for the gate, then really runs."""
    seen = Groups()

    def recorded(store: SessionStore, calls: list[ForkCall], **kwargs: object) -> object:
        seen.sizes.append(len(calls))
        assert seen.gate.wait(30)
        return engine.fork_together(store, calls, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(fork_groups, "fork_together", recorded)
    return seen


def test_a_lone_fork_goes_at_once_and_those_asked_meanwhile_go_together(
    tmp_path: Path, groups: Groups
) -> None:
    store = SessionStore(tmp_path)
    source = make_source(store, turns=2)
    request = request_for(store, source, 1)

    async def burst() -> list[ForkResult | BaseException]:
        served = ForkGroups(store, TargetsCache())
        try:
            first = asyncio.ensure_future(served.fork(ForkCall(request, "op-first")))
            await groups.running(1)
            calls = [ForkCall(request, f"op-{n}") for n in range(12)]
            calls.append(ForkCall(request_for(store, source, 0), "op-0"))  # a conflict
            later = [asyncio.ensure_future(served.fork(call)) for call in calls]
            await asyncio.sleep(0.01)
            groups.gate.set()
            return await asyncio.gather(first, *later, return_exceptions=True)
        finally:
            await served.close()

    outcomes = asyncio.run(burst())
    assert groups.sizes == [1, 13]
    assert all(isinstance(o, ForkResult) and o.created for o in outcomes[:13])
    refusal = outcomes[13]
    assert isinstance(refusal, BranchwiseError) and refusal.code == "operation_conflict"
    expected = {"op-first": 1} | {f"op-{n}": 1 for n in range(12)}
    assert children_per_operation(store) == expected


def test_closing_cancels_the_forks_still_waiting_and_writes_nothing_of_them(
    tmp_path: Path, groups: Groups
) -> None:
    store = SessionStore(tmp_path)
    source = make_source(store, turns=1)
    request = request_for(store, source, 0)

    async def close_while_waiting() -> list[ForkResult | BaseException]:
        served = ForkGroups(store, TargetsCache())
        first = asyncio.ensure_future(served.fork(ForkCall(request, "op-first")))
        await groups.running(1)
        later = [asyncio.ensure_future(served.fork(ForkCall(request, f"op-{n}"))) for n in range(5)]
        await asyncio.sleep(0)
        closing = asyncio.ensure_future(served.close())
        await asyncio.sleep(0)  # the waiting forks are cancelled; the running group goes on
        groups.gate.set()
        await closing
        return await asyncio.gather(first, *later, return_exceptions=True)

    outcomes = asyncio.run(close_while_waiting())
    assert groups.sizes == [1]
    assert isinstance(outcomes[0], ForkResult) and outcomes[0].created
    assert all(isinstance(o, asyncio.CancelledError) for o in outcomes[1:])
    assert children_per_operation(store) == {"op-first": 1}
