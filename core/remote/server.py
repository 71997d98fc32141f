"""``branchwise serve``: the store over HTTP on 127.0.0.1, behind a bearer token.

Neither endpoint touches a source's lease or its running turn: fork targets
and forks read committed frames only, so a session being written by the
desktop can be forked remotely while it streams.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import secrets
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from branchwise.core.errors import (
    BodyTooLarge,
    BranchwiseError,
    InvalidRequest,
    RouteNotFound,
    SessionMismatch,
    Unauthorized,
)
from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import TargetsCache, fork_targets
from branchwise.core.ids import validate_session_id
from branchwise.core.remote.protocol import (
    CAPABILITIES,
    EXPECTED_SESSION_HEADER,
    MAX_BODY,
    validate_fork_body,
)
from branchwise.core.store.store import SessionStore

TOKEN_FILE = "serve-token"

log = logging.getLogger(__name__)


def load_or_create_token(root: Path) -> str:
    """The server's bearer token: created on first run in a 0600 file."""
    path = root / TOKEN_FILE
    try:
        token = path.read_text().strip()
        if token:
            return token
    except FileNotFoundError:
        pass
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    return token


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def _error(exc: BranchwiseError) -> web.Response:
    return _json({"error": {"code": exc.code, "message": exc.message}}, exc.http_status)


def build_app(store: SessionStore, token: str) -> web.Application:
    """The aiohttp application serving ``store``.

    It owns one :class:`TargetsCache` for its lifetime: a client asks for a
    session's targets after every turn, and each answer then replays only the
    frames committed since the last one.
    """
    targets_cache = TargetsCache()

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            header = request.headers.get("Authorization", "")
            given = header[7:] if header.startswith("Bearer ") else ""
            if not hmac.compare_digest(given.encode(), token.encode()):
                raise Unauthorized("a valid bearer token is required")
            return await handler(request)
        except BranchwiseError as exc:
            return _error(exc)
        except web.HTTPRequestEntityTooLarge:
            return _error(BodyTooLarge("body too large"))
        except web.HTTPNotFound:
            return _error(RouteNotFound("no such endpoint"))
        except web.HTTPMethodNotAllowed:
            return _json(
                {"error": {"code": "invalid_request", "message": "method not allowed"}}, 405
            )
        except web.HTTPException as exc:
            code = "invalid_request" if exc.status < 500 else "internal_error"
            return _json({"error": {"code": code, "message": exc.reason}}, exc.status)
        except Exception as exc:
            # Never a plain-text 500: a bug (or an untyped OS error) is still a typed answer.
            log.exception("%s %s failed", request.method, request.path)
            return _json(
                {"error": {"code": "internal_error", "message": f"the server failed: {exc!r}"}},
                500,
            )

    async def capabilities(request: web.Request) -> web.Response:
        return _json({"capabilities": list(CAPABILITIES)})

    async def targets(request: web.Request) -> web.Response:
        session_id = validate_session_id(request.match_info["session_id"])
        if request.headers.get(EXPECTED_SESSION_HEADER) != session_id:
            raise SessionMismatch(f"{EXPECTED_SESSION_HEADER} must name {session_id}")
        answer = await asyncio.to_thread(fork_targets, store, session_id, cache=targets_cache)
        return _json(answer.to_json())

    async def fork_session(request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise InvalidRequest("the body is not valid JSON") from exc
        body = validate_fork_body(body)
        fork_request = ForkRequest(
            source_session_id=body["sourceSessionId"],
            turn_id=body["turnId"],
            boundary_sequence=body["boundarySequence"],
            expected_generation=body["expectedGeneration"],
        )
        result = await asyncio.to_thread(fork, store, fork_request, body["operationId"])
        return _json({"childSessionId": result.child_session_id, "created": result.created})

    app = web.Application(middlewares=[guard], client_max_size=MAX_BODY)
    app.router.add_get("/capabilities", capabilities)
    app.router.add_get("/sessions/{session_id}/fork-targets", targets)
    app.router.add_post("/fork-session", fork_session)
    return app


async def serve(store: SessionStore, host: str, port: int, ready: Any = None) -> None:
    """Serve until cancelled; ``ready(url)`` is called once listening."""
    token = load_or_create_token(store.root)
    runner = web.AppRunner(build_app(store, token), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    sockets = getattr(site._server, "sockets", None) or []
    bound = sockets[0].getsockname()[1] if sockets else port
    if ready is not None:
        ready(f"http://{host}:{bound}")
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
