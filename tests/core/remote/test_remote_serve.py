"""``branchwise serve`` as a real process, and the remote client against it."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.cli import run_cli
from helpers.serve import serve_process, server_without_capabilities

from branchwise.core.errors import RemoteRefusal, RemoteUnavailable, ServerUnsupported
from branchwise.core.remote.client import RemoteStore
from branchwise.core.store.store import SessionStore


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str, str, str]]:
    """A root with one two-turn session, served by a real ``branchwise serve`` process."""
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "remote")
    session_id = created["sessionId"]
    run_cli(root, "session", "say", session_id, "one", "--quiet")
    run_cli(root, "session", "say", session_id, "two", "--quiet")
    with serve_process(root) as server:
        yield root, server.url, server.token, session_id


def test_token_file_is_private(served: tuple[Path, str, str, str]) -> None:
    root = served[0]
    assert stat.S_IMODE(os.stat(root / "serve-token").st_mode) == 0o600


def test_remote_targets_equal_local_and_remote_fork_is_idempotent(
    served: tuple[Path, str, str, str],
) -> None:
    root, url, token, session_id = served
    remote = RemoteStore(url, token)

    async def go() -> tuple[dict, object, object]:
        await remote.require_fork_targets()
        answer = await remote.fork_targets(session_id)
        first_turn = answer["targets"][0]
        args = (session_id, first_turn["turnId"], first_turn["boundarySequence"], 1, "op-remote-1")
        return answer, await remote.fork(*args), await remote.fork(*args)

    answer, first, again = asyncio.run(go())
    _, local = run_cli(root, "session", "targets", session_id)
    assert answer == local
    assert first.created and not again.created  # type: ignore[attr-defined]
    assert first.child_session_id == again.child_session_id  # type: ignore[attr-defined]
    child = SessionStore(root).read(first.child_session_id)  # type: ignore[attr-defined]
    assert [m.content for m in child.projection.messages][0] == "one"
    assert len(child.projection.turns) == 1


def test_refusals_are_typed_with_4xx(served: tuple[Path, str, str, str]) -> None:
    _, url, token, session_id = served
    remote = RemoteStore(url, token)

    async def refused(coro: object) -> RemoteRefusal:
        try:
            await coro  # type: ignore[misc]
        except RemoteRefusal as exc:
            return exc
        raise AssertionError("not refused")

    async def go() -> list[RemoteRefusal]:
        return [
            await refused(remote.fork(session_id, "turn_nope", 5, 1, "op-x")),
            await refused(remote.fork("abcdefgh-none", "t", 5, 1, "op-y")),
            await refused(RemoteStore(url, "wrong").capabilities()),
        ]

    unknown, missing, unauthorized = asyncio.run(go())
    assert (unknown.code, unknown.details["status"]) == ("unknown_turn", 404)
    assert missing.code == "source_not_found"
    assert (unauthorized.code, unauthorized.details["status"]) == ("unauthorized", 401)


def test_bad_bodies_and_headers_are_refused(served: tuple[Path, str, str, str]) -> None:
    _, url, token, session_id = served
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=auth) as client:
        too_big = client.post("/fork-session", content=b"{" + b" " * 40_000 + b"}")
        assert too_big.status_code == 413
        assert too_big.json()["error"]["code"] == "body_too_large"
        not_json = client.post("/fork-session", content=b"{nope")
        assert not_json.json()["error"]["code"] == "invalid_request"
        wrong_type = client.post(
            "/fork-session",
            json={
                "sourceSessionId": session_id,
                "turnId": "t",
                "boundarySequence": "5",
                "expectedGeneration": 1,
                "operationId": "op",
            },
        )
        assert wrong_type.status_code == 400
        assert wrong_type.json()["error"]["code"] == "invalid_request"
        mismatch = client.get(
            f"/sessions/{session_id}/fork-targets", headers={"X-Expected-Session": "other-session"}
        )
        assert mismatch.json()["error"]["code"] == "session_mismatch"
        traversal = client.get("/sessions/..%2F..%2Fetc/fork-targets")
        assert traversal.status_code in (400, 404)


def test_unreachable_and_unsupported_servers(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RemoteUnavailable):
        asyncio.run(RemoteStore(f"http://127.0.0.1:{port}", "t", timeout=2).capabilities())

    async def go() -> None:
        async with server_without_capabilities() as url:
            with pytest.raises(ServerUnsupported):
                await RemoteStore(url, "t").require_fork_targets()

    asyncio.run(go())
