"""The host prunes ``fork-index/`` at start, off the UI thread, never an unfinished one."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from pathlib import Path

import pytest
from helpers.forking import fork_children, make_source, request_for

from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import RESERVATION_HORIZON, OperationIndex
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.journal import (
    JOURNAL_NAME,
    OperationRecord,
    OperationsJournal,
    OperationState,
    journalled_operation_ids,
)

OLD = RESERVATION_HORIZON + 24 * 3600.0


def _age(path: Path, seconds: float) -> None:
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))


def _started(root: Path) -> Host:
    """A host that has started and stopped (its pruning thread joined)."""
    host = Host(root, provider_factory=lambda _settings: DemoProvider())
    host.start()
    asyncio.run(host.shutdown())
    return host


def _forked(store: SessionStore, op: str) -> tuple[str, Path]:
    source = make_source(store, turns=1)
    child = fork(store, request_for(store, source), op).child_session_id
    return child, OperationIndex(store.root)._path(op)


def test_start_prunes_old_reservations_and_keeps_young_ones(store: SessionStore) -> None:
    old_child, old = _forked(store, "op-acknowledged-long-ago")
    _age(old, OLD)
    young_child, young = _forked(store, "op-yesterday")
    _age(young, 24 * 3600.0)

    _started(store.root)

    assert not old.exists() and young.exists()
    assert {m.session_id for m in fork_children(store)} == {old_child, young_child}


def test_an_unfinished_operation_keeps_its_old_reservation_and_recovers_its_own_child(
    store: SessionStore,
) -> None:
    """A crash after publishing, before the journal said ``completed``, 40 days ago."""
    source = make_source(store, turns=1)
    request = request_for(store, source)
    journal = OperationsJournal(store.root)
    long_ago = time.time() - OLD
    journal.put(
        OperationRecord(
            "op-pending", request, OperationState.PENDING, None, None, long_ago, long_ago
        )
    )
    child = fork(store, request, "op-pending").child_session_id
    reservation = OperationIndex(store.root)._path("op-pending")
    _age(reservation, OLD)

    async def scenario() -> list[str]:
        host = Host(store.root, provider_factory=lambda _settings: DemoProvider())
        opened: list[str] = []

        async def navigate(session_id: str) -> None:
            opened.append(session_id)

        host.navigator = navigate
        host.start()
        await host.recover()
        await host.shutdown()
        return opened

    opened = asyncio.run(scenario())

    assert opened == [child]  # the same child, not a second one
    assert [m.session_id for m in fork_children(store, source.session_id)] == [child]
    assert reservation.exists()  # kept while the journal named it; the next start prunes it
    _started(store.root)
    assert not reservation.exists()


def test_an_unreadable_journal_prunes_nothing(store: SessionStore) -> None:
    _child, old = _forked(store, "op-1")
    _age(old, OLD)
    (store.root / JOURNAL_NAME).write_bytes(b'{"version": 1, "operations": [{"operationId": "op-1"')
    assert journalled_operation_ids(store.root) is None
    host = Host(store.root, provider_factory=lambda _settings: DemoProvider())
    assert host.prune_operations() == ()
    assert old.exists()


def test_the_journal_names_every_operation_id_it_holds_valid_or_not(tmp_path: Path) -> None:
    assert journalled_operation_ids(tmp_path) == frozenset()
    (tmp_path / JOURNAL_NAME).write_bytes(
        b'{"version": 1, "operations": [{"operationId": "a"}, {"operationId": 3}, "x", '
        b'{"operationId": "b", "kind": "nonsense"}]}'
    )
    assert journalled_operation_ids(tmp_path) == frozenset({"a", "b"})
    (tmp_path / JOURNAL_NAME).write_bytes(b'{"version": 1}')
    assert journalled_operation_ids(tmp_path) is None


def test_pruning_runs_off_the_calling_thread(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    prune = OperationIndex.prune

    def spy(self: OperationIndex, *args: object, **kwargs: object) -> object:
        threads.append(threading.current_thread().name)
        return prune(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(OperationIndex, "prune", spy)
    _started(store.root)
    assert threads == ["prune fork-index"]


def test_a_failing_prune_is_logged_and_never_stops_the_start(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def fail(self: OperationIndex, *args: object, **kwargs: object) -> object:
        raise PermissionError(13, "Permission denied", str(self.directory))

    monkeypatch.setattr(OperationIndex, "prune", fail)
    with caplog.at_level(logging.ERROR, logger="branchwise.desktop.host.host"):
        host = _started(store.root)
    assert host.index is not None
    assert any("could not prune fork-index/" in r.getMessage() for r in caplog.records)
