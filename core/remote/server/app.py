"""``branchwise serve``: the store over HTTP on 127.0.0.1, behind a bearer token.

Every route is behind the token (:mod:`.guard`) and validates its path,
query and body before it reads or writes anything; every refusal is the
typed ``{"error": {"code", "message"}}`` body. Reading routes (the list, a
transcript page, events, fork targets, lineage, tree) and forks read
committed frames only and take no lease, so a session being written by the
desktop can be read and forked remotely while it streams. Only
``POST /sessions/{id}/turns`` writes a session, as its writer
(:mod:`branchwise.core.remote.turns`).

This module wires one :class:`~.state.ServerState` and the routes, one
module per group of them, into an application, and runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
import signal
import stat
from pathlib import Path
from typing import Any

from aiohttp import web

from branchwise.core.errors import PortInUse, UnsafeTokenFile
from branchwise.core.fork.targets import TargetsCache
from branchwise.core.fs.safe_open import open_no_follow
from branchwise.core.remote.fork_groups import ForkGroups
from branchwise.core.remote.protocol import (
    CAPABILITIES,
    MAX_HEADER_FIELD,
    MAX_REQUEST_LINE,
    MAX_TURN_BODY,
)
from branchwise.core.remote.server.attachments import download, upload
from branchwise.core.remote.server.events import events
from branchwise.core.remote.server.fanout import fanout_session, fuse_session
from branchwise.core.remote.server.forks import fork_session, targets
from branchwise.core.remote.server.guard import TypedErrorRunner, guard
from branchwise.core.remote.server.http_io import json_response, query_params
from branchwise.core.remote.server.lineage import lineage_of, map_of, tree_of
from branchwise.core.remote.server.models import models_of
from branchwise.core.remote.server.search import search_sessions
from branchwise.core.remote.server.sessions import (
    create_session,
    list_sessions,
    rename,
    rename_label,
    show_session,
)
from branchwise.core.remote.server.state import SERVER_STATE, ServerState
from branchwise.core.remote.server.trash import restore_session, trash_session
from branchwise.core.remote.server.turns import send_turn, stop_turn
from branchwise.core.remote.turns import ServedTurns, TurnSetup, demo_setup
from branchwise.core.search.index import SearchIndex
from branchwise.core.store.store import SessionStore

TOKEN_FILE = "serve-token"
SHUTDOWN_TIMEOUT = 2.0
"""Seconds a stopping server lets open requests (long-polls, turn streams) finish."""


def load_or_create_token(root: Path) -> str:
    """The server's bearer token: created on first run in a 0600 file.

    The file is opened without following a link and must be a regular file
    of this user that nobody else can read or write, holding UTF-8 text: a
    planted link would make the server write its token elsewhere (or take
    another file's text as its token), and a readable token is no secret.

    Raises:
        UnsafeTokenFile: the file is anything else (nothing is written).
    """
    path = root / TOKEN_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return _write_token(path)
    except OSError as exc:
        problem = "is a symbolic link" if exc.errno == errno.ELOOP else f"cannot be read ({exc})"
        raise _token_refused(path, problem) from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise _token_refused(path, "is not a regular file")
        if status.st_uid != os.getuid():
            raise _token_refused(path, "belongs to another user")
        if status.st_mode & 0o077:
            raise _token_refused(path, f"has mode {stat.S_IMODE(status.st_mode):04o}, not 0600")
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise _token_refused(path, "is not UTF-8 text") from None
    return token or _write_token(path)


def _write_token(path: Path) -> str:
    """Write a new token to ``path`` (0600, never through a link)."""
    token = secrets.token_urlsafe(32)
    fd = open_no_follow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    return token


def _token_refused(path: Path, problem: str) -> UnsafeTokenFile:
    return UnsafeTokenFile(
        f"{path} {problem}: the server's token must be a regular file of yours with mode "
        f"0600. Remove it to have a new token written, or fix it with chmod 600 {path}",
        path=str(path),
    )


async def capabilities(request: web.Request) -> web.Response:
    """``GET /capabilities``: what this server can do, so a client knows what to ask."""
    query_params(request, {})
    return json_response({"capabilities": list(CAPABILITIES)})


async def _close(app: web.Application) -> None:
    """On shutdown: running turns end as ``cancelled``; forks already running finish."""
    await app[SERVER_STATE].close()


def build_app(store: SessionStore, token: str, turns: ServedTurns | None = None) -> web.Application:
    """The aiohttp application serving ``store``.

    Its :class:`~.state.ServerState` lives as long as the application (one
    targets cache, one search index, the forks and turns in flight). ``turns``
    runs prompts sent to ``POST /sessions/{id}/turns`` (the demo responder
    when not given).
    """
    targets_cache = TargetsCache()
    state = ServerState(
        store=store,
        token=token.encode(),
        served=turns or ServedTurns(store),
        targets_cache=targets_cache,
        search=SearchIndex(store.root),
        fork_groups=ForkGroups(store, targets_cache),
    )

    app = web.Application(middlewares=[guard], client_max_size=MAX_TURN_BODY)
    app[SERVER_STATE] = state
    app.router.add_get("/capabilities", capabilities)
    app.router.add_get("/sessions", list_sessions)
    app.router.add_post("/sessions", create_session)
    app.router.add_get("/sessions/{session_id}", show_session)
    app.router.add_get("/sessions/{session_id}/events", events)
    app.router.add_post("/sessions/{session_id}/turns", send_turn)
    app.router.add_post("/sessions/{session_id}/stop", stop_turn)
    app.router.add_get("/sessions/{session_id}/fork-targets", targets)
    app.router.add_get("/sessions/{session_id}/lineage", lineage_of)
    app.router.add_get("/sessions/{session_id}/tree", tree_of)
    app.router.add_get("/sessions/{session_id}/map", map_of)
    app.router.add_post("/sessions/{session_id}/title", rename)
    app.router.add_post("/sessions/{session_id}/label", rename_label)
    app.router.add_post("/sessions/{session_id}/trash", trash_session)
    app.router.add_post("/sessions/{session_id}/restore", restore_session)
    app.router.add_get("/search", search_sessions)
    app.router.add_post("/fork-session", fork_session)
    app.router.add_post("/attachments", upload)
    app.router.add_get("/attachments/{sha256}", download)
    app.router.add_post("/sessions/{session_id}/fanout", fanout_session)
    app.router.add_get("/models", models_of)
    app.router.add_post("/sessions/{session_id}/fuse", fuse_session)
    app.on_shutdown.append(_close)
    return app


async def serve(
    store: SessionStore,
    host: str,
    port: int,
    ready: Any = None,
    setup: TurnSetup = demo_setup,
) -> None:
    """Serve until cancelled or sent SIGTERM; ``ready(url)`` is called once listening.

    Before listening, turns a killed server left running are closed as
    ``interrupted`` (see :mod:`branchwise.core.remote.turns`).

    Raises:
        PortInUse: another program listens on ``host:port``.
        UnsafeTokenFile: ``serve-token`` is not a private regular file of this user.
    """
    token = load_or_create_token(store.root)
    served = ServedTurns(store, setup)
    await asyncio.to_thread(served.recover)
    runner = TypedErrorRunner(
        build_app(store, token, served),
        access_log=None,
        shutdown_timeout=SHUTDOWN_TIMEOUT,
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
    # SIGTERM (a service manager, ``kill``) stops it as Ctrl+C does: running turns end as
    # ``cancelled``, a group of forks being made durable finishes, then it returns.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):  # no signals off the main thread
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        await stop.wait()
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGTERM)
        await runner.cleanup()
