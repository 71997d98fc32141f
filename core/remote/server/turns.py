"""Routes that run a turn for a client and stop it (:mod:`branchwise.core.remote.turns` runs it).

Only ``POST /sessions/{id}/turns`` writes a session, as its writer.
"""

from __future__ import annotations

import asyncio
import logging

import orjson
from aiohttp import web

from branchwise.core.errors import SessionNotFound
from branchwise.core.remote.protocol import MAX_BODY, MAX_TURN_BODY, NDJSON, validate_turn_body
from branchwise.core.remote.server.attachments import check_stored
from branchwise.core.remote.server.http_io import (
    json_response,
    query_params,
    read_json,
    session_of,
)
from branchwise.core.remote.server.state import state_of

log = logging.getLogger(__name__)


async def send_turn(request: web.Request) -> web.StreamResponse:
    """``POST /sessions/{id}/turns``: run a prompt; its progress streams back as NDJSON.

    ``{"answer": true}`` answers the question a branch was published with
    (an edit's or a regenerate's) instead of asking a new one.
    """
    session_id = session_of(request)
    query_params(request, {})
    body = validate_turn_body(await read_json(request, MAX_TURN_BODY))
    files = body.get("attachments", ())
    await check_stored(request, files)
    stream = await state_of(request).served.start(session_id, body.get("text"), files)
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
    """``POST /sessions/{id}/stop``: stop the turn this server runs there; whether there was one."""
    session_id = session_of(request)
    query_params(request, {})
    await read_json(request, MAX_BODY, empty_ok=True)
    state = state_of(request)
    if not await asyncio.to_thread(state.store.exists, session_id):
        raise SessionNotFound(f"no session {session_id}", sessionId=session_id)
    return json_response({"stopped": state.served.stop(session_id)})
