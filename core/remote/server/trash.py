"""Routes that move a session to the trash and back."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from branchwise.core.errors import TurnRunning
from branchwise.core.remote.protocol import MAX_BODY
from branchwise.core.remote.server.http_io import (
    json_response,
    query_params,
    read_json,
    session_of,
)
from branchwise.core.remote.server.state import state_of
from branchwise.core.store.trash import Trash


async def trash_session(request: web.Request) -> web.Response:
    """``POST /sessions/{id}/trash``: refused while this server runs a turn there."""
    session_id = session_of(request)
    query_params(request, {})
    await read_json(request, MAX_BODY, empty_ok=True)
    state = state_of(request)
    if state.served.is_running(session_id):
        raise TurnRunning(f"a turn is running in {session_id}", sessionId=session_id)

    def move() -> dict[str, Any]:
        Trash(state.store).trash(session_id)
        state.search.forget(session_id)
        return {"trashed": [session_id]}

    return json_response(await asyncio.to_thread(move))


async def restore_session(request: web.Request) -> web.Response:
    """``POST /sessions/{id}/restore``: the session back from the trash."""
    session_id = session_of(request)
    query_params(request, {})
    await read_json(request, MAX_BODY, empty_ok=True)
    await asyncio.to_thread(Trash(state_of(request).store).restore, session_id)
    return json_response({"restored": [session_id]})
