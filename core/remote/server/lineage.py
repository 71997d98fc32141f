"""Routes over a session's family: its ancestors, its descendants and its branch map."""

from __future__ import annotations

import asyncio

from aiohttp import web

from branchwise.core.conversation.family_map import family_map_json
from branchwise.core.conversation.views import session_lineage, session_tree
from branchwise.core.remote.server.http_io import json_response, query_params, session_of
from branchwise.core.remote.server.state import state_of


async def lineage_of(request: web.Request) -> web.Response:
    """``GET /sessions/{id}/lineage``: the session's ancestors, nearest first."""
    session_id = session_of(request)
    query_params(request, {})
    return json_response(
        await asyncio.to_thread(session_lineage, state_of(request).store, session_id)
    )


async def tree_of(request: web.Request) -> web.Response:
    """``GET /sessions/{id}/tree``: the session's descendants, flat and depth-first."""
    session_id = session_of(request)
    query_params(request, {})
    return json_response(await asyncio.to_thread(session_tree, state_of(request).store, session_id))


async def map_of(request: web.Request) -> web.Response:
    """``GET /sessions/{id}/map`` (``session-map-v1``): the ``session map`` answer."""
    session_id = session_of(request)
    query_params(request, {})
    return json_response(
        await asyncio.to_thread(family_map_json, state_of(request).store, session_id)
    )
