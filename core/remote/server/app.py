"""``branchwise serve``: the store over HTTP on 127.0.0.1, behind a bearer token.

Every route is behind the token and validates its path, query and body
before it reads or writes anything; every refusal is the typed
``{"error": {"code", "message"}}`` body. Reading routes (the list, a
transcript page, events, fork targets, lineage, tree) and forks read
committed frames only and take no lease, so a session being written by the
desktop can be read and forked remotely while it streams. Only
``POST /sessions/{id}/turns`` writes a session, as its writer
(:mod:`branchwise.core.remote.turns`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hmac
import logging
import os
import secrets
import signal
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler

from branchwise.core.errors import (
    BodyTooLarge,
    BranchwiseError,
    CorruptLog,
    InvalidRequest,
    PortInUse,
    RequestTooLarge,
    RouteNotFound,
    SessionMismatch,
    SessionNotFound,
    TurnRunning,
    Unauthorized,
)
from branchwise.core.fork.engine import ForkCall, ForkResult
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import TargetsCache
from branchwise.core.ids import validate_session_id
from branchwise.core.log.frames import Frame
from branchwise.core.projection.events import EventType
from branchwise.core.remote.fork_groups import ForkGroups
from branchwise.core.remote.protocol import (
    CAPABILITIES,
    DEFAULT_WAIT,
    EVENTS_POLL,
    EXPECTED_SESSION_HEADER,
    MAX_BODY,
    MAX_HEADER_FIELD,
    MAX_PAGE,
    MAX_QUERY,
    MAX_REQUEST_LINE,
    MAX_TURN_BODY,
    MAX_TURN_INDEX,
    MAX_WAIT,
    NDJSON,
    validate_fork_body,
    validate_new_session_body,
    validate_title_body,
    validate_turn_body,
)
from branchwise.core.remote.turns import ServedTurns, TurnSetup, demo_setup
from branchwise.core.search import MAX_LIMIT, SearchIndex
from branchwise.core.store.manifest import given_title
from branchwise.core.store.store import SessionStore
from branchwise.core.store.trash import Trash
from branchwise.core.views import (
    session_lineage,
    session_list,
    session_show,
    session_targets,
    session_tree,
)

TOKEN_FILE = "serve-token"
SHUTDOWN_TIMEOUT = 2.0
"""Seconds a stopping server lets open requests (long-polls, turn streams) finish."""

log = logging.getLogger(__name__)


_ASSISTANT = EventType.MESSAGE_ASSISTANT.value
_DELTA = EventType.MESSAGE_DELTA.value
_TURN_EDGES = (EventType.TURN_START.value, EventType.TURN_END.value)


def wire_commits(frames: Iterable[Frame], after: int) -> list[list[dict[str, Any]]]:
    """The events after seq ``after``, grouped by commit, as ``session-events-v1`` sends them.

    The wire keeps the meaning it had before format 2 stored partial answers
    as deltas: every partial commit carries the whole answer so far. So a
    ``message/delta`` goes out as the ``message/assistant`` with
    ``partial: true`` it stands for (same seq; the text concatenated from the
    whole log; the time of the last event before it that has one), and a
    client of any version shows the same text as a local replay.
    """
    pieces: dict[str, list[str]] = {}  # message id -> its text so far, in pieces
    models: dict[str, Any] = {}
    streaming: str | None = None  # the answer the open turn streams
    ts: Any = None
    fresh: list[list[dict[str, Any]]] = []
    for frame in frames:
        events = frame.events
        wanted = bool(events) and int(events[-1]["seq"]) > after
        commit: list[dict[str, Any]] = []
        for event in events:
            kind = event["type"]
            ts = event.get("ts", ts)
            if kind == _ASSISTANT:
                streaming = event["messageId"]
                pieces[streaming] = [event["content"]]
                models[streaming] = event.get("model")
            elif kind in _TURN_EDGES:
                streaming = None
            elif kind == _DELTA:
                streaming = event.get("messageId", streaming)
                if streaming is None:
                    raise CorruptLog(f"message/delta at seq {event['seq']} continues no answer")
                models[streaming] = event.get("model", models.get(streaming))
                parts = pieces.setdefault(streaming, [])
                parts.append(event["delta"])
                if wanted and int(event["seq"]) > after:
                    parts[:] = ["".join(parts)]
                    event = {
                        "seq": event["seq"],
                        "ts": ts,
                        "type": _ASSISTANT,
                        "messageId": streaming,
                        "content": parts[0],
                        "model": models[streaming],
                        "partial": True,
                    }
            if wanted and int(event["seq"]) > after:
                commit.append(event)
        if wanted:
            fresh.append(commit)
    return fresh


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
    """The refusal as the CLI prints it: code, message and the error's own fields."""
    return _json(exc.to_json(), status or exc.http_status)


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


def build_app(store: SessionStore, token: str, turns: ServedTurns | None = None) -> web.Application:
    """The aiohttp application serving ``store``.

    It owns one :class:`TargetsCache` for its lifetime: a client asks for a
    session's targets after every turn, and each answer then replays only the
    frames committed since the last one. ``turns`` runs prompts sent to
    ``POST /sessions/{id}/turns`` (the demo responder when not given).
    """
    targets_cache = TargetsCache()
    search = SearchIndex(store.root)
    fork_groups = ForkGroups(store, targets_cache)
    # operation id -> (the request's body, its fork waiting or running in fork_groups)
    forks_in_flight: dict[str, tuple[bytes, asyncio.Future[ForkResult]]] = {}
    served = turns or ServedTurns(store)
    expected = token.encode()

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            header = request.headers.get("Authorization", "")
            given = header[7:] if header.startswith("Bearer ") else ""
            # Constant time, so a wrong guess learns nothing from how long it took.
            if not hmac.compare_digest(given.encode(errors="replace"), expected):
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

    def session_of(request: web.Request) -> str:
        return validate_session_id(request.match_info["session_id"])

    async def capabilities(request: web.Request) -> web.Response:
        query_params(request, {})
        return _json({"capabilities": list(CAPABILITIES)})

    async def list_sessions(request: web.Request) -> web.Response:
        query_params(request, {})

        def listing() -> dict[str, Any]:
            answer = session_list(store)
            for entry in answer["sessions"]:
                session_id = entry["sessionId"]
                entry["updatedAt"] = _updated_at(store, session_id)
                entry["running"] = served.is_running(session_id) or _being_written(
                    store, session_id
                )
            return answer

        return _json(await asyncio.to_thread(listing))

    async def create_session(request: web.Request) -> web.Response:
        query_params(request, {})
        body = validate_new_session_body(await read_json(request, MAX_BODY))

        def create() -> dict[str, Any]:
            with store.create(body.get("title", "")) as writer:
                return {"sessionId": writer.session_id, "title": writer.manifest.title}

        return _json(await asyncio.to_thread(create), 201)

    async def show_session(request: web.Request) -> web.Response:
        session_id = session_of(request)
        query = query_params(request, {"offset": MAX_TURN_INDEX, "limit": MAX_PAGE})
        if "offset" in query and "limit" not in query:
            raise InvalidRequest("offset needs limit", field="offset")
        if query.get("limit") == 0:
            raise InvalidRequest("limit must be at least 1", field="limit")
        answer = await asyncio.to_thread(
            session_show, store, session_id, offset=query.get("offset"), limit=query.get("limit")
        )
        answer["running"] = served.is_running(session_id) or _being_written(store, session_id)
        return _json(answer)

    async def events(request: web.Request) -> web.Response:
        session_id = session_of(request)
        query = query_params(request, {"after": MAX_TURN_INDEX, "wait": MAX_WAIT})
        after, wait = query.get("after", 0), query.get("wait", DEFAULT_WAIT)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        after_running: bool | None = None
        while True:
            seen = _fingerprint(store, session_id)
            snapshot = await asyncio.to_thread(store.read, session_id)
            # Whole commits, as committed: a turn's boundary is the end of its commit.
            fresh = wire_commits(snapshot.scan.frames, after)
            running = served.is_running(session_id) or _being_written(store, session_id)
            if (
                fresh
                or loop.time() >= deadline
                or (after_running is not None and running != after_running)
            ):
                return _json(
                    {"commits": fresh, "lastSeq": snapshot.scan.last_seq, "running": running}
                )
            after_running = running
            # Long-poll: wake when the session's files change (any writer, any process) or
            # when its writer lets go (another app closed it: it can be written from here);
            # a client that went away ends the wait (aiohttp does not cancel handlers).
            while (
                _fingerprint(store, session_id) == seen
                and loop.time() < deadline
                and _being_written(store, session_id) == running
            ):
                transport = request.transport
                if transport is None or transport.is_closing():
                    return _json({"commits": [], "lastSeq": after, "running": False})  # unread
                await asyncio.sleep(EVENTS_POLL)

    async def send_turn(request: web.Request) -> web.StreamResponse:
        session_id = session_of(request)
        query_params(request, {})
        body = validate_turn_body(await read_json(request, MAX_TURN_BODY))
        stream = await served.start(session_id, body["text"])
        response = web.StreamResponse(headers={"Content-Type": NDJSON})
        await response.prepare(request)
        # A client that goes away cancels only this handler: the turn runs on in its
        # own task, and others follow it through the events route or stop it.
        try:
            while (record := await stream.queue.get()) is not None:
                await response.write(orjson.dumps(record) + b"\n")
            await response.write_eof()
        except ConnectionError:
            log.info("the client of the turn in %s went away; the turn runs on", session_id)
        return response

    async def stop_turn(request: web.Request) -> web.Response:
        session_id = session_of(request)
        query_params(request, {})
        await read_json(request, MAX_BODY, empty_ok=True)
        if not await asyncio.to_thread(store.exists, session_id):
            raise SessionNotFound(f"no session {session_id}", sessionId=session_id)
        return _json({"stopped": served.stop(session_id)})

    async def targets(request: web.Request) -> web.Response:
        session_id = session_of(request)
        query_params(request, {})
        if request.headers.get(EXPECTED_SESSION_HEADER) != session_id:
            raise SessionMismatch(f"{EXPECTED_SESSION_HEADER} must name {session_id}")
        answer = await asyncio.to_thread(session_targets, store, session_id, targets_cache)
        return _json(answer)

    async def lineage_of(request: web.Request) -> web.Response:
        session_id = session_of(request)
        query_params(request, {})
        return _json(await asyncio.to_thread(session_lineage, store, session_id))

    async def tree_of(request: web.Request) -> web.Response:
        session_id = session_of(request)
        query_params(request, {})
        return _json(await asyncio.to_thread(session_tree, store, session_id))

    async def fork_session(request: web.Request) -> web.Response:
        query_params(request, {})
        body = validate_fork_body(await read_json(request, MAX_BODY))
        fork_request = ForkRequest(
            source_session_id=body["sourceSessionId"],
            turn_id=body["turnId"],
            boundary_sequence=body["boundarySequence"],
            expected_generation=body["expectedGeneration"],
        )
        call = ForkCall(fork_request, body["operationId"], body.get("title"))
        # A retry of an operation in flight here waits for it rather than building the same
        # child again only to find it published (the store's idempotency still decides).
        asked = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
        running = forks_in_flight.get(body["operationId"])
        if running is not None and running[0] == asked:
            try:
                result = await asyncio.shield(running[1])
            except Exception:  # noqa: BLE001 - its refusal may not be ours: ask for ourselves
                pass
            else:
                return _json({"childSessionId": result.child_session_id, "created": False})
        # Forks asked at once are made durable together, their sources' replays and
        # seed plans shared in ``targets_cache``.
        future = asyncio.ensure_future(fork_groups.fork(call))
        mine = (asked, future)
        forks_in_flight.setdefault(body["operationId"], mine)
        try:
            result = await future
        finally:
            if forks_in_flight.get(body["operationId"]) is mine:
                del forks_in_flight[body["operationId"]]
        return _json({"childSessionId": result.child_session_id, "created": result.created})

    async def rename(request: web.Request) -> web.Response:
        session_id = session_of(request)
        query_params(request, {})
        title = given_title(validate_title_body(await read_json(request, MAX_BODY)))

        def write() -> dict[str, Any]:
            # A turn this server runs holds the writer: lease_held (409), try again after it.
            with store.open_writer(session_id) as writer:
                writer.set_title(title)
                return {"sessionId": session_id, "title": writer.manifest.title}

        return _json(await asyncio.to_thread(write))

    async def trash_session(request: web.Request) -> web.Response:
        session_id = session_of(request)
        query_params(request, {})
        await read_json(request, MAX_BODY, empty_ok=True)
        if served.is_running(session_id):
            raise TurnRunning(f"a turn is running in {session_id}", sessionId=session_id)

        def move() -> dict[str, Any]:
            Trash(store).trash(session_id)
            search.forget(session_id)
            return {"trashed": [session_id]}

        return _json(await asyncio.to_thread(move))

    async def restore_session(request: web.Request) -> web.Response:
        session_id = session_of(request)
        query_params(request, {})
        await read_json(request, MAX_BODY, empty_ok=True)
        await asyncio.to_thread(Trash(store).restore, session_id)
        return _json({"restored": [session_id]})

    async def search_sessions(request: web.Request) -> web.Response:
        text, limit = _search_query(request)

        def answer() -> dict[str, Any]:
            # The logs are the truth and nothing indexes on a turn's commit path: catch
            # up first (one manifest read and fstat per session when nothing changed).
            search.catch_up_all(store)
            result = search.search(text, limit=limit)
            # The CLI's answer, and where the matches are in each snippet (to highlight).
            hits = [{**hit.to_json(), "spans": list(hit.spans)} for hit in result.hits]
            return {"hits": hits, "total": result.total}

        return _json(await asyncio.to_thread(answer))

    async def stop_turns(app: web.Application) -> None:
        await served.shutdown()
        await asyncio.to_thread(search.close)
        # Forks already running finish (each publishes whole or not at all); none start.
        await fork_groups.close()

    app = web.Application(middlewares=[guard], client_max_size=MAX_TURN_BODY)
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
    app.router.add_post("/sessions/{session_id}/title", rename)
    app.router.add_post("/sessions/{session_id}/trash", trash_session)
    app.router.add_post("/sessions/{session_id}/restore", restore_session)
    app.router.add_get("/search", search_sessions)
    app.router.add_post("/fork-session", fork_session)
    app.on_shutdown.append(stop_turns)
    return app


async def read_json(request: web.Request, limit: int, *, empty_ok: bool = False) -> Any:
    """The request's JSON body, at most ``limit`` bytes.

    Raises:
        BodyTooLarge: over ``limit`` (declared, or as read).
        InvalidRequest: not JSON (an empty body is ``None`` when ``empty_ok``).
    """
    declared = request.content_length
    if declared is not None and declared > limit:
        raise BodyTooLarge(f"the body is over {limit} bytes", limit=limit)
    raw = await request.content.read(limit + 1)
    if len(raw) > limit:
        raise BodyTooLarge(f"the body is over {limit} bytes", limit=limit)
    if not raw.strip() and empty_ok:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest("the body is not valid JSON") from exc


def query_params(request: web.Request, allowed: dict[str, int]) -> dict[str, int]:
    """The query's parameters: only ``allowed`` names, each a whole number ``0..allowed[name]``."""
    values: dict[str, int] = {}
    for name in request.query:
        if name not in allowed:
            raise InvalidRequest(f"unknown query parameter {name[:40]!r}", field=name[:40])
        values[name] = _whole_number(request, name, allowed[name])
    return values


def _whole_number(request: web.Request, name: str, most: int) -> int:
    """The query parameter ``name``, given once, as a whole number ``0..most``."""
    text = request.query.getall(name)
    if len(text) != 1 or not text[0].isascii() or not text[0].isdigit():
        raise InvalidRequest(f"{name} must be a whole number", field=name)
    value = int(text[0]) if len(text[0]) <= 20 else most + 1
    if value > most:
        raise InvalidRequest(f"{name} must be at most {most}", field=name)
    return value


def _search_query(request: web.Request) -> tuple[str, int]:
    """``q`` (the text, once, 1…:data:`MAX_QUERY` characters) and ``limit`` (1…1000, 20)."""
    unknown = sorted(set(request.query) - {"q", "limit"})
    if unknown:
        raise InvalidRequest(f"unknown query parameter {unknown[0][:40]!r}", field=unknown[0][:40])
    texts = request.query.getall("q", [])
    if len(texts) != 1 or not texts[0].strip():
        raise InvalidRequest("q must be given once, not empty", field="q")
    if len(texts[0]) > MAX_QUERY:
        raise InvalidRequest(f"q is over {MAX_QUERY} characters", field="q")
    limit = _whole_number(request, "limit", MAX_LIMIT) if "limit" in request.query else 20
    if limit == 0:
        raise InvalidRequest("limit must be at least 1", field="limit")
    return texts[0], limit


def _updated_at(store: SessionStore, session_id: str) -> float | None:
    """When the session last changed (a commit, a title), Unix seconds."""
    stamps = [mtime for _name, _size, mtime in _file_stats(store, session_id)]
    return max(stamps) / 1e9 if stamps else None


def _being_written(store: SessionStore, session_id: str) -> bool:
    try:
        return store.is_being_written(session_id)
    except (OSError, BranchwiseError):
        return False


def _file_stats(store: SessionStore, session_id: str) -> list[tuple[str, int, int]]:
    """``(path, size, mtime_ns)`` of each file of a session, one folder level deep.

    A format-2 session appends to segments in a subfolder, whose change does
    not touch the session folder's own entries.
    """
    try:
        top = store.session_dir(session_id)
    except BranchwiseError:
        return []
    stats: list[tuple[str, int, int]] = []
    folders, depth = [top], 0
    while folders and depth < 2:
        deeper: list[Path] = []
        for folder in folders:
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        if entry.is_dir(follow_symlinks=False):
                            deeper.append(Path(entry.path))
                            continue
                        info = entry.stat(follow_symlinks=False)
                        stats.append((entry.path, info.st_size, info.st_mtime_ns))
            except OSError:
                continue
        folders, depth = deeper, depth + 1
    return stats


def _fingerprint(store: SessionStore, session_id: str) -> tuple[tuple[str, int, int], ...]:
    """Size and change time of each file of a session: a commit changes one of them."""
    return tuple(sorted(_file_stats(store, session_id)))


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
    """
    token = load_or_create_token(store.root)
    turns = ServedTurns(store, setup)
    await asyncio.to_thread(turns.recover)
    runner = _Runner(
        build_app(store, token, turns),
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
