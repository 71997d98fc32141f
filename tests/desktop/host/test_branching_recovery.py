"""Fork recovery on start (docs/architecture.md): records a previous run left behind."""

from __future__ import annotations

import asyncio
from pathlib import Path
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

from branchwise.core.fork.operations import ForkRequest
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.backends import LocalForkBackend
from branchwise.desktop.host.journal import (
    JOURNAL_NAME,
    OperationRecord,
    OperationsJournal,
    OperationState,
)
from branchwise.desktop.host.notices import Level, NoticeAction


@pytest.fixture
def source(store: SessionStore) -> Source:
    return make_source(store)


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
    third = ForkRequest(third.source_session_id, third.turn_id, third.boundary_sequence, 1)
    made = run(LocalForkBackend(store).fork(second, "op_ran"))
    other = make_source(store, 1, "other")
    done = run(LocalForkBackend(store).fork(request_for(store, other), "op_done"))
    seed_journal(
        store.root,
        pending_record("op_never_ran", first),
        pending_record("op_ran", second),
        pending_record("op_done", request_for(store, other)).completed(done.child_session_id, 2.0),
    )
    host = CoordinatorHarness(store)
    summary = run(host.coordinator.recover())

    assert summary.count == 3 and len(summary.opened) == 3
    assert made.child_session_id in summary.opened and done.child_session_id in summary.opened
    assert sorted(host.tabs.opened) == sorted(summary.opened)
    assert host.journal() == []
    assert children_per_operation(store) == {"op_never_ran": 1, "op_ran": 1, "op_done": 1}
    [notice] = host.notices.history
    assert notice.code == "fork_recovered" and notice.level is Level.SUCCESS
    assert notice.params == {"count": 3, "opened": 3, "pending": 0, "refused": 0, "failed": 0}
    assert run(CoordinatorHarness(store).coordinator.recover()).count == 0  # nothing left to do


def test_recovery_reports_what_it_could_not_finish(store: SessionStore, source: Source) -> None:
    req0, req1 = request_for(store, source, 0), request_for(store, source, 1)
    stale = ForkRequest(req1.source_session_id, req1.turn_id, req1.boundary_sequence, 9)
    kept = run(LocalForkBackend(store).fork(req1, "op_kept"))
    seed_journal(
        store.root,
        pending_record("op_unsure", req0),
        pending_record("op_stale", stale),
        pending_record("op_kept", req1).completed(kept.child_session_id, 2.0),
    )
    backend = RemoteDouble(LocalForkBackend(store), ["refuse_reset"])
    host = CoordinatorHarness(store, backend, tabs=Tabs(failures_left=1, store=store))
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
    gone_source = ForkRequest("0190a1b2-0000-7000-8000-000000000001", "turn_0", 6, 1)
    request = request_for(store, source)
    seed_journal(
        store.root,
        pending_record("op_no_source", gone_source),
        pending_record("op_no_child", request).completed("0190a1b2-0000-7000-8000-00000000000c", 2),
    )
    host = CoordinatorHarness(store)
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
    host = CoordinatorHarness(store)
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
    host = CoordinatorHarness(store)
    summary = run(host.coordinator.recover())
    assert summary.opened and children_per_operation(store) == {"op_good": 1}
    assert host.codes() == ["journal_record_dropped", "fork_recovered"]


def test_a_click_during_recovery_joins_the_resumed_operation(
    store: SessionStore, source: Source
) -> None:
    request = request_for(store, source)
    seed_journal(store.root, pending_record("op_left", request))
    backend = RemoteDouble(LocalForkBackend(store), ["gate"])
    host = CoordinatorHarness(store, backend)

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
    host = CoordinatorHarness(store)
    [record] = host.coordinator.records()
    assert record.operation_id == "op_left" and record.request == request
