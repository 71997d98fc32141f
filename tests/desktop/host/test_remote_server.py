"""The desktop's side of a ``branchwise serve`` (no Qt): saved connections, list, transcript,
branching through the journal, an unsupported server, and a server that goes away.

Every test talks to a real ``branchwise serve`` subprocess on 127.0.0.1 (or, for
"unsupported", a real HTTP server that advertises nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import stat
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import pytest
from helpers.forking import children_per_operation, make_source, request_for
from helpers.serve import serve_process, server_without_capabilities, server_without_fork_titles
from helpers.sessions import commits_of

from branchwise.core.errors import BranchwiseError, InvalidServerUrl
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.remote.client import RemoteStore
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.backends import RemoteForkBackend
from branchwise.desktop.host.connections import (
    SERVERS_FILE,
    TOKENS_DIR,
    Connection,
    load_connections,
    read_token,
    save_connection,
)
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.notices import NoticeCenter
from branchwise.desktop.host.rows import DesktopReason, rows_from_projection
from branchwise.desktop.host.sources import ConnectionState, RemoteConversation, RemoteSource

FAST = {"backoff": (0.05, 0.1, 0.2), "refresh_interval": 0.1, "timeout": 5.0}


def _server(desktop: Path, url: str, token: str, notices: NoticeCenter) -> RemoteSource:
    return RemoteSource(desktop, Connection("workstation", url), token, notices, **FAST)  # type: ignore[arg-type]


def test_a_saved_connection_keeps_its_token_private_and_out_of_the_list(tmp_path: Path) -> None:
    root = tmp_path / "desktop"
    root.mkdir()
    saved = save_connection(root, "", "http://127.0.0.1:8765/", "s3cret-token")
    assert saved == Connection("127.0.0.1:8765", "http://127.0.0.1:8765")
    token_file = root / TOKENS_DIR / saved.slug
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(root / TOKENS_DIR).st_mode) == 0o700
    assert b"s3cret" not in (root / SERVERS_FILE).read_bytes()
    assert load_connections(root) == [saved]
    assert read_token(root, saved) == "s3cret-token"
    renamed = save_connection(root, "Home", "http://127.0.0.1:8765", "other")
    assert load_connections(root) == [renamed] and read_token(root, renamed) == "other"
    for url, token in [
        ("ftp://x", "t"),
        ("not a url", "t"),
        ("http://h:1", ""),
        ("http://h", "a b"),
    ]:
        with pytest.raises(InvalidServerUrl):
            save_connection(root, "x", url, token)
    assert load_connections(root) == [renamed]


def test_list_transcript_and_a_branch_through_the_journal(tmp_path: Path) -> None:
    served_root = tmp_path / "served"
    store = SessionStore(served_root)
    source = make_source(store, turns=2, title="on the workstation")
    desktop = tmp_path / "desktop"
    desktop.mkdir()
    notices = NoticeCenter()
    opened: list[str] = []

    async def scenario(url: str, token: str) -> None:
        server = _server(desktop, url, token, notices)

        async def navigate(_server: RemoteSource, child: str) -> None:
            opened.append(child)

        server.navigator = navigate
        await server.connect()
        assert server.state == ConnectionState.CONNECTED and server.supported
        assert [(m.session_id, m.title) for m in server.listing.newest_first()] == [
            (source.session_id, "on the workstation")
        ]
        transcript = await server.open_conversation(source.session_id)
        local_rows = rows_from_projection(store.read(source.session_id).projection)
        assert transcript.rows == local_rows  # the same projection, the same rows
        assert transcript.title == "on the workstation"
        states = [transcript.server_branch_state(row) for row in transcript.rows]
        assert all(state.enabled for state in states)
        assert states[0].target == request_for(store, source, turn=0)
        child = await server.request_branch(states[0].target)  # type: ignore[arg-type]
        assert child is not None and opened == [child]
        assert server.coordinator.records() == ()
        assert child in server.listing.index.by_id
        branch = store.read(child)
        assert [m.content for m in branch.projection.messages] == ["question 0", "answer 0"]
        # Named as a local branch is, by the server as it publishes it.
        assert branch.manifest.title == "on the workstation (branch 1)"
        assert server.title(child) == "on the workstation (branch 1)"
        # After acknowledgement a new click on the same turn is a new branch.
        second = await server.request_branch(states[0].target)  # type: ignore[arg-type]
        assert second not in (None, child)
        assert store.manifest(second).title == "on the workstation (branch 2)"  # type: ignore[arg-type]

    with serve_process(served_root) as served:
        asyncio.run(scenario(served.url, served.token))


def test_a_server_killed_before_the_fork_answers_keeps_the_record_and_gives_one_child(
    tmp_path: Path,
) -> None:
    served_root = tmp_path / "served"
    store = SessionStore(served_root)
    source = make_source(store, turns=1)
    request = request_for(store, source)
    desktop = tmp_path / "desktop"
    desktop.mkdir()
    notices = NoticeCenter()
    opened: list[str] = []

    async def navigate(_server: RemoteSource, child: str) -> None:
        opened.append(child)

    with serve_process(served_root) as served:
        url, token = served.url, served.token

        async def first_click() -> RemoteSource:
            server = _server(desktop, url, token, notices)
            server.navigator = navigate
            await server.connect()
            os.kill(served.pid, signal.SIGKILL)
            assert await server.request_branch(request) is None
            return server

        server = asyncio.run(first_click())
    assert server.state == ConnectionState.DISCONNECTED
    assert "server_disconnected" in [n.code for n in notices.history]
    [pending] = server.coordinator.records()
    journal = orjson.loads(
        (desktop / "servers" / server.connection.slug / "fork-operations.json").read_bytes()
    )
    assert pending.operation_id in str(journal)

    port = urlsplit(url).port
    assert port is not None
    with serve_process(served_root, port=port):

        async def next_start() -> None:
            again = _server(desktop, url, token, notices)
            again.navigator = navigate
            await again.connect()  # resumes the pending record with its operation id
            assert again.coordinator.records() == ()
            child = await again.request_branch(request)  # a new click: a new operation
            assert child is not None

        asyncio.run(next_start())
    assert children_per_operation(store)[pending.operation_id] == 1
    assert len(opened) == 2 and opened[0] != opened[1]


def test_a_server_without_fork_targets_is_unsupported_on_every_branch_action(
    tmp_path: Path,
) -> None:
    desktop = tmp_path / "desktop"
    desktop.mkdir()
    notices = NoticeCenter()
    store = SessionStore(tmp_path / "served")
    source = make_source(store, turns=1)

    async def scenario() -> None:
        async with server_without_capabilities() as url:
            server = _server(desktop, url, "token", notices)
            await server.connect()
            assert server.state == ConnectionState.CONNECTED and not server.supported
            assert [n.code for n in notices.history] == ["server_unsupported"]
            transcript = RemoteConversation(server, source.session_id)
            transcript.apply_commits(commits_of(store, source.session_id))
            await transcript.refresh_targets()  # asks nothing of such a server
            assert len(transcript.rows) == 1
            for row in transcript.rows:
                state = transcript.server_branch_state(row)
                assert state.target is None and state.reason == DesktopReason.SERVER_UNSUPPORTED

    asyncio.run(scenario())


def test_a_server_that_goes_away_is_reported_and_reconnected_with_backoff(
    tmp_path: Path,
) -> None:
    served_root = tmp_path / "served"
    make_source(SessionStore(served_root), turns=1)
    desktop = tmp_path / "desktop"
    desktop.mkdir()
    notices = NoticeCenter()

    async def wait_for(predicate: object, timeout: float = 30.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not predicate():  # type: ignore[operator]
            assert asyncio.get_running_loop().time() < deadline, "timed out"
            await asyncio.sleep(0.02)

    with serve_process(served_root) as served:
        url, token, pid = served.url, served.token, served.pid
        port = urlsplit(url).port
        assert port is not None

        async def scenario() -> None:
            server = _server(desktop, url, token, notices)
            server.start()
            await wait_for(lambda: server.state == ConnectionState.CONNECTED)
            os.kill(pid, signal.SIGKILL)
            await wait_for(lambda: server.state == ConnectionState.DISCONNECTED)
            await asyncio.sleep(0.5)  # several reconnection attempts fail meanwhile
            assert [n.code for n in notices.history].count("server_disconnected") == 1
            restarted = await asyncio.to_thread(_restart, served_root, port)
            try:
                await wait_for(lambda: server.state == ConnectionState.CONNECTED)
                assert [n.code for n in notices.history][-1] == "server_reconnected"
                assert len(server.listing.index) == 1
            finally:
                await server.stop()
                await asyncio.to_thread(_stop, restarted)

        asyncio.run(scenario())


def _restart(root: Path, port: int) -> object:
    context = serve_process(root, port=port)
    context.__enter__()
    return context


def _stop(context: object) -> None:
    context.__exit__(None, None, None)  # type: ignore[attr-defined]


def test_a_server_restarted_mid_turn_shows_the_turn_interrupted(tmp_path: Path) -> None:
    served_root = tmp_path / "served"
    store = SessionStore(served_root)
    source = make_source(store, turns=1)
    desktop = tmp_path / "desktop"
    desktop.mkdir()
    notices = NoticeCenter()

    async def wait_for(predicate: object, timeout: float = 30.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not predicate():  # type: ignore[operator]
            assert asyncio.get_running_loop().time() < deadline, "timed out"
            await asyncio.sleep(0.02)

    with serve_process(served_root, args=["--delay-ms", "50"]) as served:
        url, token, pid = served.url, served.token, served.pid
        port = urlsplit(url).port
        assert port is not None

        async def scenario() -> None:
            server = _server(desktop, url, token, notices)
            server.start()
            await wait_for(lambda: server.state == ConnectionState.CONNECTED)
            transcript = await server.open_conversation(source.session_id)
            follow = asyncio.ensure_future(transcript.follow())
            sending = asyncio.ensure_future(server.send(source.session_id, "a long one"))
            await wait_for(lambda: transcript.running and len(transcript.rows) == 2)
            assert transcript.rows[-1].running
            os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(BranchwiseError):
                await sending
            restarted = await asyncio.to_thread(_restart, served_root, port)
            try:
                await wait_for(lambda: transcript.rows[-1].end_reason == "interrupted")
                assert not transcript.running
                assert transcript.server_branch_state(transcript.rows[0]).enabled
            finally:
                follow.cancel()
                await server.stop()
                await asyncio.to_thread(_stop, restarted)

        asyncio.run(scenario())


def test_a_server_from_before_fork_titles_gets_no_title_and_still_forks() -> None:
    child = "0190aaaa-bbbb-7ccc-8ddd-eeeeffff0001"
    request = ForkRequest("0190aaaa-bbbb-7ccc-8ddd-eeeeffff0000", "t1", 4, 1)

    async def scenario() -> None:
        async with server_without_fork_titles(child) as (url, bodies):
            backend = RemoteForkBackend(RemoteStore(url, "token"))
            result = await backend.fork(request, "op-old", title="notes (branch 1)")
            assert result.child_session_id == child
            assert [sorted(body) for body in bodies] == [
                [
                    "boundarySequence",
                    "expectedGeneration",
                    "operationId",
                    "sourceSessionId",
                    "turnId",
                ]
            ]

    asyncio.run(scenario())


async def _until(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_the_host_keeps_its_servers_and_connects_them_again_at_start(tmp_path: Path) -> None:
    served_root = tmp_path / "served"
    make_source(SessionStore(served_root), turns=1, title="kept there")
    desktop = tmp_path / "desktop"
    desktop.mkdir()

    with serve_process(served_root) as served:

        async def first_start() -> None:
            host = Host(desktop)
            source = host.servers.connect("workstation", served.url, served.token, **FAST)
            await _until(lambda: source.connected)
            assert host.servers.of(served.url) is source
            await host.shutdown()

        async def next_start() -> None:
            host = Host(desktop)
            [source] = host.servers.connect_saved(**FAST)
            assert source.name == "workstation"
            await _until(lambda: source.connected)
            assert [m.title for m in source.listing.newest_first()] == ["kept there"]
            await host.shutdown()

        asyncio.run(first_start())
        assert load_connections(desktop) == [Connection("workstation", served.url)]
        asyncio.run(next_start())
