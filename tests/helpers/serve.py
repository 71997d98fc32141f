"""``branchwise serve`` as a real process on 127.0.0.1, and a server that cannot branch."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web


@dataclass(frozen=True)
class Served:
    """A running server: where it listens, its bearer token, and its process."""

    url: str
    token: str
    pid: int
    process: subprocess.Popen[str]


@contextmanager
def serve_process(
    root: Path, log: Path | None = None, args: Sequence[str] = (), port: int = 0
) -> Iterator[Served]:
    """Run ``branchwise serve --port PORT args…`` on ``root`` until the block ends (then SIGINT).

    ``port`` 0 picks a free one; a restarted server reuses its predecessor's.

    ``log`` receives the server's stderr (its log), for tests that read it.
    A test may SIGKILL ``pid`` (or signal ``process``) inside the block.
    """
    with contextlib.ExitStack() as stack:
        stderr = stack.enter_context(log.open("wb")) if log is not None else None
        proc = subprocess.Popen(
            [sys.executable, "-m", "branchwise.desktop.entry", "--data-dir", str(root)]
            + ["serve", "--port", str(port), *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        assert proc.stdout is not None
        try:
            ready = orjson.loads(proc.stdout.readline())
            token = Path(ready["tokenFile"]).read_text().strip()
            yield Served(ready["url"], token, proc.pid, proc)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=10)
            proc.stdout.close()


@asynccontextmanager
async def server_without_capabilities(
    shown: list[list[dict[str, Any]]] | None = None,
) -> AsyncIterator[str]:
    """An HTTP server on 127.0.0.1 whose ``/capabilities`` lists nothing; yields its URL.

    Its ``/sessions`` lists no conversation (an older server a desktop can still list);
    its events route gives ``shown`` (commits) for any conversation, once.
    """

    async def no_capabilities(request: web.Request) -> web.Response:
        return web.json_response({"capabilities": []})

    async def no_sessions(request: web.Request) -> web.Response:
        return web.json_response({"sessions": [], "damaged": []})

    async def events(request: web.Request) -> web.Response:
        if request.query.get("after") == "0" and shown:
            return web.json_response({"commits": shown, "running": False})
        await asyncio.sleep(min(float(request.query.get("wait", "0")), 0.5))
        return web.json_response({"commits": [], "running": False})

    app = web.Application()
    app.router.add_get("/capabilities", no_capabilities)
    app.router.add_get("/sessions", no_sessions)
    app.router.add_get("/sessions/{session_id}/events", events)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def server_without_fork_titles(child_id: str) -> AsyncIterator[tuple[str, list[dict]]]:
    """A server as ``branchwise serve`` was before ``session-fork-title-v1``, on 127.0.0.1.

    It advertises fork targets and forks, refuses a ``POST /fork-session``
    body with a field it does not know (as that version did), and answers any
    other fork with ``child_id``. Yields its URL and the fork bodies it got.
    """
    bodies: list[dict] = []
    known = {"sourceSessionId", "turnId", "boundarySequence", "expectedGeneration", "operationId"}

    async def capabilities(request: web.Request) -> web.Response:
        return web.json_response(
            {"capabilities": ["session-fork-targets-v1", "session-fork-v1", "sessions-list-v1"]}
        )

    async def fork(request: web.Request) -> web.Response:
        body = await request.json()
        bodies.append(body)
        unknown = sorted(set(body) - known)
        if unknown:
            error = {"code": "invalid_request", "message": f"unknown fields: {unknown}"}
            return web.json_response({"error": error}, status=400)
        return web.json_response({"childSessionId": child_id, "created": True})

    app = web.Application()
    app.router.add_get("/capabilities", capabilities)
    app.router.add_post("/fork-session", fork)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", bodies
    finally:
        await runner.cleanup()
