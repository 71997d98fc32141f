"""``branchwise serve``: the store over HTTP on 127.0.0.1, behind a bearer token.

Neither endpoint touches a source's lease or its running turn: fork targets
and forks read committed frames only, so a session being written by the
desktop can be forked remotely while it streams.
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import logging
import os
import secrets
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler

from branchwise.core.errors import (
    BodyTooLarge,
    BranchwiseError,
    InvalidRequest,
    PortInUse,
    RequestTooLarge,
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
    MAX_HEADER_FIELD,
    MAX_REQUEST_LINE,
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


def _error(exc: BranchwiseError, status: int | None = None) -> web.Response:
    body = {"error": {"code": exc.code, "message": exc.message}}
    return _json(body, status or exc.http_status)


class _TypedErrorHandler(RequestHandler):
    """aiohttp's connection handler, answering what its parser refuses in the API's JSON.

    A request line or header over the limit, or bytes that are not HTTP, fail
    in aiohttp's parser before any middleware runs; aiohttp then answers a
    plain-text 400 and logs a traceback (it offers no hook: aio-libs/aiohttp#3287).
    Such a request is the client's mistake: it gets a typed JSON refusal and
    costs the log one line at ``INFO`` (silent unless logging is configured).
    """

    def handle_error(
        self,
        request: Any,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if not isinstance(exc, HttpProcessingError):
            super().handle_error(request, status, exc, message)  # a bug: keep its traceback
            response = _error(BranchwiseError("internal server error"), 500)
        else:
            refusal, status = _parser_refusal(exc)
            self.logger.info("refused a request from %s: %s", request.remote, refusal.code)
            if request.writer.output_size > 0:  # as aiohttp: too late for another response
                raise ConnectionError("a response was already sent")
            response = _error(refusal, status)
        response.force_close()
        return response


def _parser_refusal(exc: HttpProcessingError) -> tuple[BranchwiseError, int]:
    """The typed refusal and status for what aiohttp's parser refused."""
    if isinstance(exc, LineTooLong):
        limit = exc.args[1] if len(exc.args) > 1 else None
        if limit == MAX_REQUEST_LINE:
            return RequestTooLarge(f"the request line is over {MAX_REQUEST_LINE} bytes"), 414
        return RequestTooLarge(f"a request header is over {MAX_HEADER_FIELD} bytes"), 431
    status = exc.code if 400 <= exc.code < 500 else 400
    return InvalidRequest("the request is not well-formed HTTP"), status


class _TypedErrorServer(web.Server):
    """The low-level server, with :class:`_TypedErrorHandler` for each connection."""

    def __call__(self) -> RequestHandler:
        return _TypedErrorHandler(self, loop=self._loop, **self._kwargs)


class _Runner(web.AppRunner):
    """An :class:`~aiohttp.web.AppRunner` whose connections answer parser errors in JSON."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        # The application builds a plain Server; only its connection handler class differs.
        server.__class__ = _TypedErrorServer
        return server


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
    """Serve until cancelled; ``ready(url)`` is called once listening.

    Raises:
        PortInUse: another program listens on ``host:port``.
    """
    token = load_or_create_token(store.root)
    runner = _Runner(
        build_app(store, token),
        access_log=None,
        max_line_size=MAX_REQUEST_LINE,
        max_field_size=MAX_HEADER_FIELD,
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(
                f"{host}:{port} is already in use by another program", host=host, port=port
            ) from None
        raise
    sockets = getattr(site._server, "sockets", None) or []
    bound = sockets[0].getsockname()[1] if sockets else port
    if ready is not None:
        ready(f"http://{host}:{bound}")
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
