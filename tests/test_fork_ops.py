"""The fork click protocol (DESIGN §4) against a real store and journal."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from fork_ops_helpers import (
    RemoteDouble,
    Source,
    Tabs,
    children_per_operation,
    fork_children,
    make_source,
    request_for,
)

from branchwise.core.errors import BranchwiseError
from branchwise.core.store import SessionStore
from branchwise.desktop.fork_backend import ForkResult, LocalForkBackend
from branchwise.desktop.fork_ops import BranchStatus, ForkCoordinator
from branchwise.desktop.journal import (
    JOURNAL_NAME,
    ForkRequest,
    OperationRecord,
    OperationsJournal,
    OperationState,
    read_journal_document,
)
from branchwise.desktop.notices import Level, NoticeAction, NoticeCenter

T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


class Host:
    """A coordinator wired like the app, over one data root."""

    def __init__(
        self,
        store: SessionStore,
        backend: Any = None,
        tabs: Tabs | None = None,
        **options: Any,
    ) -> None:
        self.store = store
        self.local = LocalForkBackend(store)
        self.backend = backend if backend is not None else self.local
        self.tabs = tabs or Tabs(store=store)
        self.notices = NoticeCenter()
        self.coordinator = ForkCoordinator(
            store.root, self.backend, self.notices, self.tabs.open, **options
        )

    def codes(self) -> list[str]:
        return [n.code for n in self.notices.history]

    def journal(self) -> list[dict[str, Any]]:
        document = read_journal_document(self.store.root)
        return [] if document is None else list(document["operations"])


@pytest.fixture
def source(store: SessionStore) -> Source:
    return make_source(store)


# -- steps 1-3: the happy path ---------------------------------------------------


class InspectingBackend(RemoteDouble):
    """Looks at the journal on disk at the moment the fork request is sent."""

    seen: list[dict[str, Any]]

    async def fork(self, request: ForkRequest, operation_id: str) -> ForkResult:
        document = read_journal_document(self.inner.store.root)
        self.seen = [] if document is None else list(document["operations"])
        return await super().fork(request, operation_id)


def test_click_journals_first_then_forks_opens_and_acknowledges(
    store: SessionStore, source: Source
) -> None:
    backend = InspectingBackend(LocalForkBackend(store))
    journal_at_open: list[list[dict[str, Any]]] = []
    host = Host(store, backend)
    opener = host.tabs.open

    async def inspecting_open(session_id: str) -> None:
        journal_at_open.append(host.journal())
        await opener(session_id)

    host.coordinator.opener = inspecting_open
    request = request_for(store, source)
    outcome = run(host.coordinator.branch(request))

    assert outcome.status is BranchStatus.OPENED and outcome.created
    [pending] = backend.seen
    assert pending["state"] == "pending" and pending["operationId"] == outcome.operation_id
    assert pending["request"] == request.to_json()
    [[completed]] = journal_at_open
    assert completed["state"] == "completed"
    assert completed["childSessionId"] == outcome.child_session_id
    assert host.tabs.opened == [outcome.child_session_id]
    assert host.journal() == []
    [child] = fork_children(store, source.session_id)
    assert child.session_id == outcome.child_session_id
    assert child.created_by_operation == outcome.operation_id
    assert host.codes() == ["fork_created"]
    assert host.notices.history[0].params["child"] == outcome.child_session_id


def test_after_acknowledgement_a_new_click_creates_another_child(
    store: SessionStore, source: Source
) -> None:
    host = Host(store)
    request = request_for(store, source)
    first = run(host.coordinator.branch(request))
    second = run(host.coordinator.branch(request))
    assert first.opened and second.opened
    assert first.operation_id != second.operation_id
    assert first.child_session_id != second.child_session_id
    assert len(fork_children(store, source.session_id)) == 2


def test_two_clicks_before_the_first_finishes_make_one_child(
    store: SessionStore, source: Source
) -> None:
    backend = RemoteDouble(LocalForkBackend(store), ["gate"])
    host = Host(store, backend)
    request = request_for(store, source)

    async def double_click() -> tuple[Any, Any, bool, bool]:
        first = asyncio.ensure_future(host.coordinator.branch(request))
        while not backend.calls:  # the first click's request is out
            await asyncio.sleep(0)
        in_flight = host.coordinator.is_in_flight(request)
        other_turn = host.coordinator.is_in_flight(request_for(store, source, 1))
        second = asyncio.ensure_future(host.coordinator.branch(request))
        await asyncio.sleep(0)
        backend.release.set()
        return await first, await second, in_flight, other_turn

    first, second, in_flight, other_turn = run(double_click())
    assert in_flight and not other_turn
    assert first == second and first.opened
    assert backend.calls == [first.operation_id]
    assert len(fork_children(store, source.session_id)) == 1
    assert host.tabs.opened == [first.child_session_id]
    assert not host.coordinator.is_in_flight(request)


def test_simultaneous_clicks_join_without_any_wait(store: SessionStore, source: Source) -> None:
    host = Host(store)
    request = request_for(store, source)

    async def clicks() -> list[Any]:
        return list(await asyncio.gather(*(host.coordinator.branch(request) for _ in range(5))))

    outcomes = run(clicks())
    assert len(set(outcomes)) == 1
    assert len(fork_children(store, source.session_id)) == 1


# -- step 4: uncertain outcomes keep the record ----------------------------------


def test_stalled_remote_times_out_keeps_the_record_and_a_retry_returns_one_child(
    store: SessionStore, source: Source
) -> None:
    backend = RemoteDouble(LocalForkBackend(store), ["stall"])
    host = Host(store, backend, fork_timeout=0.05)
    request = request_for(store, source)

    first = run(host.coordinator.branch(request))
    assert first.status is BranchStatus.UNCERTAIN and first.reason == "timeout"
    [kept] = host.journal()
    assert kept["state"] == "pending" and kept["operationId"] == first.operation_id
    assert "timeout" in kept["error"]
    assert host.codes() == ["fork_uncertain"]
    assert host.notices.history[-1].level is Level.WARNING
    assert fork_children(store) == []

    retry = run(host.coordinator.branch(request))
    assert retry.opened and retry.operation_id == first.operation_id
    assert backend.calls == [first.operation_id, first.operation_id]
    assert children_per_operation(store) == {first.operation_id: 1}
    assert host.journal() == []


@pytest.mark.parametrize("trouble", ["lost_reply", "garbled"])
def test_lost_or_garbled_reply_after_the_fork_retries_to_the_same_child(
    store: SessionStore, source: Source, trouble: str
) -> None:
    backend = RemoteDouble(LocalForkBackend(store), [trouble])
    host = Host(store, backend)
    request = request_for(store, source)

    first = run(host.coordinator.branch(request))
    assert first.status is BranchStatus.UNCERTAIN
    assert first.reason == {"lost_reply": "disconnected", "garbled": "undecodable_reply"}[trouble]
    [made] = fork_children(store, source.session_id)  # the fork did happen
    assert host.journal()[0]["state"] == "pending"
    assert host.tabs.opened == []

    retry = run(host.coordinator.branch(request))
    assert retry.opened and not retry.created
    assert retry.child_session_id == made.session_id
    assert len(fork_children(store, source.session_id)) == 1


def test_a_reply_naming_a_malformed_child_is_uncertain(store: SessionStore, source: Source) -> None:
    class BadChild(RemoteDouble):
        async def fork(self, request: ForkRequest, operation_id: str) -> ForkResult:
            await super().fork(request, operation_id)
            return ForkResult("../../etc", True, operation_id)

    host = Host(store, BadChild(LocalForkBackend(store)))
    outcome = run(host.coordinator.branch(request_for(store, source)))
    assert outcome.status is BranchStatus.UNCERTAIN
    assert host.journal()[0]["state"] == "pending"
    assert host.tabs.opened == []


def test_a_non_definitive_typed_error_is_uncertain(store: SessionStore, source: Source) -> None:
    class DiskTrouble(RemoteDouble):
        async def fork(self, request: ForkRequest, operation_id: str) -> ForkResult:
            raise BranchwiseError("fsync failed")  # internal_error: may or may not have happened

    host = Host(store, DiskTrouble(LocalForkBackend(store)))
    outcome = run(host.coordinator.branch(request_for(store, source)))
    assert outcome.status is BranchStatus.UNCERTAIN and outcome.reason == "internal_error"
    assert len(host.journal()) == 1


# -- step 6: definitive refusals ---------------------------------------------------


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"generation": 7}, "stale_source"),
        ({"turn_id": "turn_missing"}, "unknown_turn"),
        ({"source_session_id": "0190a1b2-0000-7000-8000-000000000000"}, "source_not_found"),
    ],
)
def test_definitive_refusal_removes_the_record_and_shows_the_reason(
    store: SessionStore, source: Source, change: dict[str, Any], code: str
) -> None:
    import dataclasses

    host = Host(store)
    request = dataclasses.replace(request_for(store, source), **change)
    outcome = run(host.coordinator.branch(request))
    assert outcome.status is BranchStatus.REFUSED and outcome.reason == code
    assert host.journal() == []
    assert fork_children(store) == []
    [notice] = host.notices.history
    assert notice.code == "fork_refused" and notice.params == {"reason": code}
    assert notice.level is Level.ERROR


def test_journal_that_cannot_be_written_starts_nothing(store: SessionStore, source: Source) -> None:
    import os

    (store.root / f".{JOURNAL_NAME}.tmp-{os.getpid()}").mkdir()
    host = Host(store)
    outcome = run(host.coordinator.branch(request_for(store, source)))
    assert outcome.status is BranchStatus.NOT_STARTED
    assert fork_children(store) == []
    assert host.codes() == ["journal_write_failed"]


# -- step 5: the child's tab cannot open --------------------------------------------


def test_attach_failure_keeps_and_names_the_child_and_a_second_click_opens_it(
    store: SessionStore, source: Source
) -> None:
    host = Host(store, tabs=Tabs(failures_left=1, store=store))
    request = request_for(store, source)

    failed = run(host.coordinator.branch(request))
    assert failed.status is BranchStatus.ATTACH_FAILED and failed.created
    child = failed.child_session_id
    assert child is not None and store.exists(child)
    [notice] = host.notices.history
    assert notice.code == "fork_attach_failed" and notice.params == {"child": child}
    assert notice.action == NoticeAction("open_session", child)
    [record] = host.journal()
    assert record["state"] == "completed" and record["childSessionId"] == child

    again = run(host.coordinator.branch(request))
    assert again.opened and not again.created
    assert again.child_session_id == child and again.operation_id == failed.operation_id
    assert host.tabs.opened == [child]
    assert host.journal() == []
    assert [m.session_id for m in fork_children(store)] == [child]  # nothing was deleted


def test_opening_a_kept_child_from_the_notice_acknowledges_it(
    store: SessionStore, source: Source
) -> None:
    host = Host(store, tabs=Tabs(failures_left=1, store=store))
    failed = run(host.coordinator.branch(request_for(store, source)))
    child = str(failed.child_session_id)
    assert run(host.coordinator.open_kept_child(child))
    assert host.tabs.opened == [child] and host.journal() == []
    # A session no record names opens plainly.
    assert run(host.coordinator.open_kept_child(source.session_id))
    assert host.tabs.opened == [child, source.session_id]


def test_a_kept_child_deleted_meanwhile_drops_its_record(
    store: SessionStore, source: Source
) -> None:
    import shutil

    host = Host(store, tabs=Tabs(failures_left=1, store=store))
    request = request_for(store, source)
    failed = run(host.coordinator.branch(request))
    shutil.rmtree(store.session_dir(str(failed.child_session_id)))
    gone = run(host.coordinator.branch(request))
    assert gone.status is BranchStatus.CHILD_MISSING
    assert host.journal() == []
    assert host.codes()[-1] == "journal_record_dropped"
    assert run(host.coordinator.branch(request)).opened  # the next click starts afresh


# -- step 7: recovery on start ------------------------------------------------------------


def seed_journal(root: Path, *records: OperationRecord) -> None:
    journal = OperationsJournal(root)
    journal.load()
    for record in records:
        journal.put(record)


def pending_record(op: str, request: ForkRequest) -> OperationRecord:
    return OperationRecord(op, request, OperationState.PENDING, created_at=1.0, updated_at=1.0)


def test_recovery_resumes_every_record_with_one_notice(store: SessionStore, source: Source) -> None:
    # A pending operation whose fork never ran, one whose fork ran but whose
    # reply was lost, and a completed one whose tab never opened.
    first, second, third = (request_for(store, source, i) for i in (0, 1, 1))
    third = ForkRequest(third.source_session_id, 1, third.turn_id, third.boundary_sequence)
    made = run(LocalForkBackend(store).fork(second, "op_ran"))
    other = make_source(store, 1, "other")
    done = run(LocalForkBackend(store).fork(request_for(store, other), "op_done"))
    seed_journal(
        store.root,
        pending_record("op_never_ran", first),
        pending_record("op_ran", second),
        pending_record("op_done", request_for(store, other)).completed(done.child_session_id, 2.0),
    )
    host = Host(store)
    summary = run(host.coordinator.recover())

    assert summary.count == 3 and len(summary.opened) == 3
    assert made.child_session_id in summary.opened and done.child_session_id in summary.opened
    assert sorted(host.tabs.opened) == sorted(summary.opened)
    assert host.journal() == []
    assert children_per_operation(store) == {"op_never_ran": 1, "op_ran": 1, "op_done": 1}
    [notice] = host.notices.history
    assert notice.code == "fork_recovered" and notice.level is Level.SUCCESS
    assert notice.params == {"count": 3, "opened": 3, "pending": 0, "refused": 0, "failed": 0}
    assert run(Host(store).coordinator.recover()).count == 0  # nothing left to do


def test_recovery_reports_what_it_could_not_finish(store: SessionStore, source: Source) -> None:
    req0, req1 = request_for(store, source, 0), request_for(store, source, 1)
    stale = ForkRequest(req1.source_session_id, 9, req1.turn_id, req1.boundary_sequence)
    kept = run(LocalForkBackend(store).fork(req1, "op_kept"))
    seed_journal(
        store.root,
        pending_record("op_unsure", req0),
        pending_record("op_stale", stale),
        pending_record("op_kept", req1).completed(kept.child_session_id, 2.0),
    )
    backend = RemoteDouble(LocalForkBackend(store), ["refuse_reset"])
    host = Host(store, backend, tabs=Tabs(failures_left=1, store=store))
    summary = run(host.coordinator.recover())

    assert summary.still_pending == ("op_unsure",)
    assert summary.refused == (("op_stale", "stale_source"),)
    assert summary.attach_failed == (kept.child_session_id,)
    assert [r["operationId"] for r in host.journal()] == ["op_unsure", "op_kept"]
    [notice] = host.notices.history
    assert notice.code == "fork_recovered" and notice.level is Level.WARNING
    assert notice.params == {"count": 3, "opened": 0, "pending": 1, "refused": 1, "failed": 1}
    assert notice.action == NoticeAction("open_session", kept.child_session_id)


def test_records_naming_missing_sessions_are_dropped_not_retried(
    store: SessionStore, source: Source
) -> None:
    gone_source = ForkRequest("0190a1b2-0000-7000-8000-000000000001", 1, "turn_0", 6)
    request = request_for(store, source)
    seed_journal(
        store.root,
        pending_record("op_no_source", gone_source),
        pending_record("op_no_child", request).completed("0190a1b2-0000-7000-8000-00000000000c", 2),
    )
    host = Host(store)
    summary = run(host.coordinator.recover())
    assert summary.count == 0
    assert sorted(d.reason for d in summary.dropped) == ["child_missing", "source_missing"]
    assert host.journal() == [] and fork_children(store) == []
    [notice] = host.notices.history
    assert notice.code == "journal_record_dropped" and notice.params["count"] == 2


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"\x00garbage{", "corrupt"), (b'{"version": 99, "operations": []}', "unknown_version")],
)
def test_bad_journal_is_moved_aside_and_the_host_starts(
    store: SessionStore, source: Source, content: bytes, reason: str
) -> None:
    (store.root / JOURNAL_NAME).write_bytes(content)
    host = Host(store)
    summary = run(host.coordinator.recover())
    assert summary.moved_aside is not None and summary.moved_aside.read_bytes() == content
    assert summary.moved_aside.name.startswith(f"{JOURNAL_NAME}.bad-")
    [notice] = host.notices.history
    assert notice.code == "journal_reset" and notice.params["reason"] == reason
    assert notice.params["path"] == str(summary.moved_aside)
    assert run(host.coordinator.branch(request_for(store, source))).opened


def test_invalid_records_are_dropped_with_a_notice(store: SessionStore, source: Source) -> None:
    good = pending_record("op_good", request_for(store, source)).to_json()
    document = {"version": 1, "operations": [{"operationId": "op_bad", "kind": "fork"}, good]}
    import orjson

    (store.root / JOURNAL_NAME).write_bytes(orjson.dumps(document))
    host = Host(store)
    summary = run(host.coordinator.recover())
    assert summary.opened and children_per_operation(store) == {"op_good": 1}
    assert host.codes() == ["journal_record_dropped", "fork_recovered"]


def test_a_click_during_recovery_joins_the_resumed_operation(
    store: SessionStore, source: Source
) -> None:
    request = request_for(store, source)
    seed_journal(store.root, pending_record("op_left", request))
    backend = RemoteDouble(LocalForkBackend(store), ["gate"])
    host = Host(store, backend)

    async def start_and_click() -> tuple[Any, Any]:
        recovery = asyncio.ensure_future(host.coordinator.recover())
        while not backend.calls:
            await asyncio.sleep(0)
        click = asyncio.ensure_future(host.coordinator.branch(request))
        await asyncio.sleep(0)
        backend.release.set()
        return await recovery, await click

    summary, click = run(start_and_click())
    assert click.operation_id == "op_left" and click.opened
    assert summary.opened == (click.child_session_id,)
    assert backend.calls == ["op_left"]
    assert children_per_operation(store) == {"op_left": 1}


def test_records_are_inspectable(store: SessionStore, source: Source) -> None:
    request = request_for(store, source)
    seed_journal(store.root, pending_record("op_left", request))
    host = Host(store)
    [record] = host.coordinator.records()
    assert record.operation_id == "op_left" and record.request == request


# -- the UI loop stays responsive ------------------------------------------------------


def test_the_local_fork_runs_off_the_event_loop(store: SessionStore) -> None:
    from branchwise.core import events as ev

    with store.create("big") as writer:
        for i in range(40):
            writer.commit([ev.turn_start(f"turn_{i}"), ev.user_message(f"u{i}", "x" * 200_000)])
            writer.commit([ev.turn_end(f"turn_{i}", ev.EndReason.COMPLETED)])
        big = Source(writer.session_id, tuple(f"turn_{i}" for i in range(40)))
    host = Host(store)
    request = request_for(store, big, 39)

    async def click_with_heartbeat() -> tuple[Any, float, float]:
        loop = asyncio.get_running_loop()
        click = asyncio.ensure_future(host.coordinator.branch(request))
        started = last = loop.time()
        longest = 0.0
        while not click.done():
            await asyncio.sleep(0.001)
            now = loop.time()
            longest, last = max(longest, now - last), now
        return await click, longest, last - started

    outcome, longest_gap, took = run(click_with_heartbeat())
    assert outcome.opened
    # A fork on the loop thread would stall the heartbeat for most of the click.
    assert longest_gap < took / 2, (longest_gap, took)
