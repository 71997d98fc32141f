"""Fork backends: one contract, run against the local store and a real ``branchwise serve``.

As eventsourcing runs ``AggregateRecorderTestCase`` against every recorder,
:class:`ForkBackendContract` states what the fork coordinator relies on from
any backend, and each ``Test…`` class only says how to make one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import cli_command
from helpers.forking import Tabs, children_per_operation, make_source, request_for
from helpers.serve import serve_process, server_without_capabilities
from helpers.sessions import visible_sessions, write_big_session

from branchwise.core.errors import BranchwiseError, ServerUnsupported, SessionNotFound, error_class
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.i18n.reasons import reason_text
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.remote.client import RemoteStore
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.backends import (
    ForkBackend,
    LocalForkBackend,
    RemoteForkBackend,
    remote_fork_fields,
)
from branchwise.desktop.host.branching import BranchStatus, ForkCoordinator
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.notices import NoticeCenter
from branchwise.desktop.host.rows import DesktopReason


def _refusal(backend: ForkBackend, request: object, operation_id: str) -> BranchwiseError:
    with pytest.raises(BranchwiseError) as caught:
        asyncio.run(backend.fork(request, operation_id))  # type: ignore[arg-type]
    return caught.value


def _stale(request: ForkRequest) -> ForkRequest:
    """The same click, made against a generation the source no longer has."""
    return dataclasses.replace(request, expected_generation=request.expected_generation + 1)


KILL_DELAYS = (0.0, 0.01, 0.05)
"""Seconds after the operation id is reserved at which the forking process is killed
(the first lands inside the fork; a later one may find it done: both must hold)."""

CrashThenRestart = Callable[[ForkRequest, str, float], ForkBackend]
"""Start ``fork(request, operation id)`` in the backend's own process, SIGKILL that
process ``delay`` seconds after the id is reserved, and return a backend that works
again (the process restarted, as the desktop's next start or a restarted server)."""


def _wait_for_reservation(root: Path, before: int, proc_alive: Callable[[], bool]) -> None:
    """Until ``fork-index/`` holds more than ``before`` entries (the fork has begun)."""
    index = root / "fork-index"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc_alive():
        if index.exists() and len(os.listdir(index)) > before:
            return
        time.sleep(0.001)


def _index_size(root: Path) -> int:
    index = root / "fork-index"
    return len(os.listdir(index)) if index.exists() else 0


class ForkBackendContract:
    """What every fork backend does.

    Not collected itself (no ``Test`` prefix): each subclass defines the
    ``backend`` and ``crash_then_restart`` fixtures its tests ask for.
    """

    def test_a_fork_killed_midway_then_retried_makes_exactly_one_child(
        self, store: SessionStore, crash_then_restart: CrashThenRestart
    ) -> None:
        # Big enough that the fork takes a while, so the kill can land inside it.
        session_id = write_big_session(store, 4000, 20)
        snapshot = store.read(session_id)
        turn = snapshot.projection.turns[-1]
        assert turn.boundary_sequence is not None
        request = ForkRequest(
            session_id, turn.turn_id, turn.boundary_sequence, snapshot.manifest.generation
        )
        for n, delay in enumerate(KILL_DELAYS):
            operation_id = f"op_killed_{n}"
            backend = crash_then_restart(request, operation_id, delay)
            result = asyncio.run(backend.fork(request, operation_id))
            again = asyncio.run(backend.fork(request, operation_id))
            assert again.child_session_id == result.child_session_id and not again.created
            assert children_per_operation(store)[operation_id] == 1
            child = store.read(result.child_session_id)
            assert len(child.projection.turns) == 4000
        assert not [p for p in store.sessions_dir.iterdir() if p.name.startswith(".")]

    def test_fork_is_idempotent_per_operation_id(
        self, store: SessionStore, backend: ForkBackend
    ) -> None:
        source = make_source(store, turns=2)
        request = request_for(store, source, turn=0)
        first = asyncio.run(backend.fork(request, "op_contract_a"))
        again = asyncio.run(backend.fork(request, "op_contract_a"))
        other = asyncio.run(backend.fork(request, "op_contract_b"))
        assert first.created and not again.created and other.created
        assert again.child_session_id == first.child_session_id != other.child_session_id
        child = store.read(first.child_session_id)
        assert [m.content for m in child.projection.messages] == ["question 0", "answer 0"]
        assert child.manifest.parent is not None
        assert child.manifest.parent.session_id == source.session_id

    def test_refusals_are_typed_definitive_and_create_nothing(
        self, store: SessionStore, backend: ForkBackend
    ) -> None:
        source = make_source(store, turns=2)
        request = request_for(store, source, turn=0)
        before = visible_sessions(store)
        inside = dataclasses.replace(request, boundary_sequence=request.boundary_sequence - 1)
        unknown = dataclasses.replace(request, turn_id="turn_nope")
        missing = dataclasses.replace(request, source_session_id="abcdefgh-none")
        refusals = [
            _refusal(backend, _stale(request), "op_stale"),
            _refusal(backend, inside, "op_inside"),
            _refusal(backend, unknown, "op_unknown"),
            _refusal(backend, missing, "op_missing"),
        ]
        assert [r.code for r in refusals] == [
            "stale_source",
            "boundary_not_atomic",
            "unknown_turn",
            "source_not_found",
        ]
        assert all(r.definitive for r in refusals)
        gone = error_class(refusals[3].code)
        assert gone is not None and issubclass(gone, SessionNotFound)
        assert visible_sessions(store) == before

    def test_session_exists(self, store: SessionStore, backend: ForkBackend) -> None:
        source = make_source(store, turns=1)
        child = asyncio.run(backend.fork(request_for(store, source), "op_exists"))
        for session_id, exists in [
            (source.session_id, True),
            (child.child_session_id, True),
            ("abcdefgh-none", False),
            ("../../etc", False),
        ]:
            assert asyncio.run(backend.session_exists(session_id)) is exists, session_id

    def test_the_coordinator_runs_clicks_through_it(
        self, store: SessionStore, backend: ForkBackend, tmp_path: Path
    ) -> None:
        source = make_source(store, turns=1)
        desktop = tmp_path / "desktop"
        desktop.mkdir()
        tabs = Tabs()
        coordinator = ForkCoordinator(desktop, backend, NoticeCenter(), tabs.open)
        request = request_for(store, source)
        opened = asyncio.run(coordinator.branch(request))
        refused = asyncio.run(coordinator.branch(_stale(request)))
        assert opened.opened and tabs.opened == [opened.child_session_id]
        assert (refused.status, refused.reason) == (BranchStatus.REFUSED, "stale_source")
        assert coordinator.records() == ()


class TestLocalForkBackend(ForkBackendContract):
    """The contract on this machine's store."""

    @pytest.fixture
    def backend(self, store: SessionStore) -> Iterator[ForkBackend]:
        yield LocalForkBackend(store)

    @pytest.fixture
    def crash_then_restart(self, store: SessionStore) -> Iterator[CrashThenRestart]:
        """The fork runs in a real ``branchwise session fork`` process, killed midway."""

        def crash(request: ForkRequest, operation_id: str, delay: float) -> ForkBackend:
            before = _index_size(store.root)
            proc = subprocess.Popen(
                [*cli_command(store.root), "session", "fork", request.source_session_id]
                + ["--turn", request.turn_id, "--boundary", str(request.boundary_sequence)]
                + ["--generation", str(request.expected_generation)]
                + ["--operation-id", operation_id],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            _wait_for_reservation(store.root, before, lambda: proc.poll() is None)
            time.sleep(delay)
            proc.kill()
            proc.wait(timeout=30)
            store.sweep_temporary()  # what the desktop's next start does
            return LocalForkBackend(store)

        yield crash


@pytest.fixture(scope="module")
def served_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str]]:
    """One real ``branchwise serve`` for the remote contract tests: (root, url, token)."""
    root = tmp_path_factory.mktemp("served") / "root"
    SessionStore(root)  # the server serves an existing root
    with serve_process(root) as server:
        yield root, server.url, server.token


class TestRemoteForkBackend(ForkBackendContract):
    """The contract over HTTP, against a real ``branchwise serve`` on 127.0.0.1."""

    @pytest.fixture
    def store(self, served_root: tuple[Path, str, str]) -> SessionStore:
        return SessionStore(served_root[0])

    @pytest.fixture
    def backend(self, served_root: tuple[Path, str, str]) -> Iterator[ForkBackend]:
        _, url, token = served_root
        yield RemoteForkBackend(RemoteStore(url, token))

    @pytest.fixture
    def crash_then_restart(self, served_root: tuple[Path, str, str]) -> Iterator[CrashThenRestart]:
        """A server of its own gets ``POST /fork-session``, is SIGKILLed midway and restarted."""
        root = served_root[0]
        restarted = contextlib.ExitStack()

        def crash(request: ForkRequest, operation_id: str, delay: float) -> ForkBackend:
            before = _index_size(root)
            with serve_process(root) as doomed:
                remote = RemoteStore(doomed.url, doomed.token, timeout=60)
                call = remote.fork(*remote_fork_fields(request), operation_id)
                worker = threading.Thread(target=_swallow, args=(call,))
                worker.start()
                _wait_for_reservation(root, before, worker.is_alive)
                time.sleep(delay)
                os.kill(doomed.pid, signal.SIGKILL)
                worker.join(timeout=60)
            again = restarted.enter_context(serve_process(root))
            return RemoteForkBackend(RemoteStore(again.url, again.token))

        with restarted:
            yield crash


def _swallow(call: Coroutine[Any, Any, object]) -> None:
    """Run a request whose server is about to be killed; its outcome is unknown by design."""
    with contextlib.suppress(BranchwiseError):
        asyncio.run(call)


def test_a_server_that_cannot_branch_turns_branch_actions_off(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root")
    source = make_source(store, turns=1)

    async def scenario() -> None:
        async with server_without_capabilities() as url:
            backend = RemoteForkBackend(RemoteStore(url, "token"))
            host = Host(
                store.root,
                provider_factory=lambda _settings: DemoProvider(),
                fork_backend=backend,
            )
            host.start()
            session = host.open_session(source.session_id)
            row = session.rows[0]
            assert host.branch_state(source.session_id, row).enabled
            await host.recover()
            assert not host.server_supported
            state = host.branch_state(source.session_id, row)
            assert state.target is None and state.reason == DesktopReason.SERVER_UNSUPPORTED
            assert reason_text(state.reason) == (
                "This server does not support branching conversations."
            )
            assert [n.code for n in host.notices.history] == ["server_unsupported"]
            # No fallback: the backend refuses, definitively (the journal drops such a record).
            with pytest.raises(ServerUnsupported) as caught:
                await backend.fork(request_for(store, source), "op_unsupported")
            assert caught.value.definitive
            await host.shutdown()

    asyncio.run(scenario())
    assert visible_sessions(store) == {source.session_id}


def test_the_local_store_always_supports_branching(tmp_path: Path) -> None:
    host = Host(tmp_path / "root", provider_factory=lambda _settings: DemoProvider())
    assert asyncio.run(host.check_server()) and host.server_supported
