"""The fork click protocol (docs/architecture.md) against a real store and journal."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import pytest
from helpers.forking import (
    CoordinatorHarness,
    RemoteDouble,
    Source,
    Tabs,
    children_per_operation,
    fork_children,
    make_source,
    request_for,
    run,
)

from branchwise.core.errors import BranchwiseError
from branchwise.core.fork.engine import ForkResult
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.backends import LocalForkBackend
from branchwise.desktop.host.branching import BranchStatus
from branchwise.desktop.host.journal import JOURNAL_NAME, read_journal_document, request_to_json
from branchwise.desktop.host.notices import Level, NoticeAction


@pytest.fixture
def source(store: SessionStore) -> Source:
    return make_source(store)


# -- steps 1-3: the happy path ---------------------------------------------------


class InspectingBackend(RemoteDouble):
    """Looks at the journal on disk at the moment the fork request is sent."""

    seen: list[dict[str, Any]]

    async def fork(
        self, request: ForkRequest, operation_id: str, *, title: str | None = None
    ) -> ForkResult:
        document = read_journal_document(self.inner.store.root)
        self.seen = [] if document is None else list(document["operations"])
        return await super().fork(request, operation_id, title=title)


def test_click_journals_first_then_forks_opens_and_acknowledges(
    store: SessionStore, source: Source
) -> None:
    backend = InspectingBackend(LocalForkBackend(store))
    journal_at_open: list[list[dict[str, Any]]] = []
    host = CoordinatorHarness(store, backend)
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
    assert pending["request"] == request_to_json(request)
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
    host = CoordinatorHarness(store)
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
    host = CoordinatorHarness(store, backend)
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
    host = CoordinatorHarness(store)
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
    # The stall never answers, so any timeout ends the first call; the retry is a
    # real fork in a worker thread, which a loaded machine can slow well past 50 ms.
    host = CoordinatorHarness(store, backend, fork_timeout=1.0)
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
    host = CoordinatorHarness(store, backend)
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
        async def fork(
            self, request: ForkRequest, operation_id: str, *, title: str | None = None
        ) -> ForkResult:
            await super().fork(request, operation_id, title=title)
            return ForkResult("../../etc", True, operation_id)

    host = CoordinatorHarness(store, BadChild(LocalForkBackend(store)))
    outcome = run(host.coordinator.branch(request_for(store, source)))
    assert outcome.status is BranchStatus.UNCERTAIN
    assert host.journal()[0]["state"] == "pending"
    assert host.tabs.opened == []


def test_a_non_definitive_typed_error_is_uncertain(store: SessionStore, source: Source) -> None:
    class DiskTrouble(RemoteDouble):
        async def fork(
            self, request: ForkRequest, operation_id: str, *, title: str | None = None
        ) -> ForkResult:
            raise BranchwiseError("fsync failed")  # internal_error: may or may not have happened

    host = CoordinatorHarness(store, DiskTrouble(LocalForkBackend(store)))
    outcome = run(host.coordinator.branch(request_for(store, source)))
    assert outcome.status is BranchStatus.UNCERTAIN and outcome.reason == "internal_error"
    assert len(host.journal()) == 1


# -- step 6: definitive refusals ---------------------------------------------------


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"expected_generation": 7}, "stale_source"),
        ({"turn_id": "turn_missing"}, "unknown_turn"),
        ({"source_session_id": "0190a1b2-0000-7000-8000-000000000000"}, "source_not_found"),
    ],
)
def test_definitive_refusal_removes_the_record_and_shows_the_reason(
    store: SessionStore, source: Source, change: dict[str, Any], code: str
) -> None:
    import dataclasses

    host = CoordinatorHarness(store)
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
    host = CoordinatorHarness(store)
    outcome = run(host.coordinator.branch(request_for(store, source)))
    assert outcome.status is BranchStatus.NOT_STARTED
    assert fork_children(store) == []
    assert host.codes() == ["journal_write_failed"]


# -- step 5: the child's tab cannot open --------------------------------------------


def test_attach_failure_keeps_and_names_the_child_and_a_second_click_opens_it(
    store: SessionStore, source: Source
) -> None:
    host = CoordinatorHarness(store, tabs=Tabs(failures_left=1, store=store))
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
    host = CoordinatorHarness(store, tabs=Tabs(failures_left=1, store=store))
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

    host = CoordinatorHarness(store, tabs=Tabs(failures_left=1, store=store))
    request = request_for(store, source)
    failed = run(host.coordinator.branch(request))
    shutil.rmtree(store.session_dir(str(failed.child_session_id)))
    gone = run(host.coordinator.branch(request))
    assert gone.status is BranchStatus.CHILD_MISSING
    assert host.journal() == []
    assert host.codes()[-1] == "journal_record_dropped"
    assert run(host.coordinator.branch(request)).opened  # the next click starts afresh


# -- the UI loop stays responsive ------------------------------------------------------


def test_the_local_fork_runs_off_the_event_loop(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fork's durable work happens on a worker thread, never on the loop's.

    Every ``os.fsync`` of the click is attributed to the thread that made it
    (the same wrapping the click counts use): the journal's own writes may run
    on the loop, the fork's (reservation, child segment, manifest, folders)
    must not, or a big fork would freeze the window.
    """
    from branchwise.core.projection import events as ev

    with store.create("big") as writer:
        for i in range(40):
            writer.commit([ev.turn_start(f"turn_{i}"), ev.user_message(f"u{i}", "x" * 2_000)])
            writer.commit([ev.turn_end(f"turn_{i}", ev.EndReason.COMPLETED)])
        big = Source(writer.session_id, tuple(f"turn_{i}" for i in range(40)))
    host = CoordinatorHarness(store)
    request = request_for(store, big, 39)
    sessions_dir = str(store.root / "sessions")
    threads: list[tuple[int, str]] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        threads.append((threading.get_ident(), os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    async def click() -> tuple[Any, int]:
        return await host.coordinator.branch(request), threading.get_ident()

    monkeypatch.setattr(os, "fsync", fsync)
    outcome, loop_thread = run(click())
    monkeypatch.undo()
    assert outcome.opened
    fork_fsyncs = [(t, path) for t, path in threads if path.startswith(sessions_dir)]
    assert fork_fsyncs, threads  # the child's segment, manifest and folders
    assert all(t != loop_thread for t, _ in fork_fsyncs), fork_fsyncs
