"""Routes over whole sessions: the list, a new session, a transcript page, a new title."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from branchwise.core.conversation import names
from branchwise.core.conversation.views import session_list, session_show
from branchwise.core.errors import InvalidRequest
from branchwise.core.remote.protocol import (
    MAX_BODY,
    MAX_PAGE,
    MAX_TURN_INDEX,
    validate_label_body,
    validate_new_session_body,
    validate_title_body,
)
from branchwise.core.remote.server.http_io import (
    json_response,
    query_params,
    read_json,
    session_of,
)
from branchwise.core.remote.server.state import state_of, updated_at
from branchwise.core.store.manifest import given_title


async def list_sessions(request: web.Request) -> web.Response:
    """``GET /sessions``: the CLI's list, with when each changed and whether it runs a turn."""
    query_params(request, {})
    state = state_of(request)

    def listing() -> dict[str, Any]:
        answer = session_list(state.store)
        for entry in answer["sessions"]:
            session_id = entry["sessionId"]
            entry["updatedAt"] = updated_at(state.store, session_id)
            entry["running"] = state.is_running(session_id)
        return answer

    return json_response(await asyncio.to_thread(listing))


async def create_session(request: web.Request) -> web.Response:
    """``POST /sessions``: a new empty session, titled as asked."""
    query_params(request, {})
    body = validate_new_session_body(await read_json(request, MAX_BODY))
    store = state_of(request).store

    def create() -> dict[str, Any]:
        with store.create(body.get("title", "")) as writer:
            return {"sessionId": writer.session_id, "title": writer.manifest.title}

    return json_response(await asyncio.to_thread(create), 201)


async def show_session(request: web.Request) -> web.Response:
    """``GET /sessions/{id}[?offset=N&limit=N]``: a transcript page, as the CLI shows it."""
    session_id = session_of(request)
    query = query_params(request, {"offset": MAX_TURN_INDEX, "limit": MAX_PAGE})
    if "offset" in query and "limit" not in query:
        raise InvalidRequest("offset needs limit", field="offset")
    if query.get("limit") == 0:
        raise InvalidRequest("limit must be at least 1", field="limit")
    state = state_of(request)
    answer = await asyncio.to_thread(
        session_show,
        state.store,
        session_id,
        offset=query.get("offset"),
        limit=query.get("limit"),
    )
    answer["running"] = state.is_running(session_id)
    return json_response(answer)


async def rename(request: web.Request) -> web.Response:
    """``POST /sessions/{id}/title``: the session's new title, written as its writer."""
    session_id = session_of(request)
    query_params(request, {})
    title = given_title(validate_title_body(await read_json(request, MAX_BODY)))
    store = state_of(request).store

    def write() -> dict[str, Any]:
        # A turn this server runs holds the writer: lease_held (409), try again after it.
        with store.open_writer(session_id) as writer:
            writer.set_title(title)
            return {"sessionId": session_id, "title": writer.manifest.title}

    return json_response(await asyncio.to_thread(write))


async def rename_label(request: web.Request) -> web.Response:
    """``POST /sessions/{id}/label``: a branch's label as the user gave it, as its writer."""
    session_id = session_of(request)
    query_params(request, {})
    label = validate_label_body(await read_json(request, MAX_BODY))
    store = state_of(request).store
    # A turn this server runs holds the writer: lease_held (409), try again after it.
    return json_response(await asyncio.to_thread(names.rename, store, session_id, label=label))
