"""The search route: every served session's text, through the server's one index."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from branchwise.core.conversation.views import label_hits
from branchwise.core.errors import InvalidRequest
from branchwise.core.remote.protocol import MAX_QUERY
from branchwise.core.remote.server.http_io import json_response, whole_number
from branchwise.core.remote.server.state import state_of
from branchwise.core.search.query import MAX_LIMIT


async def search_sessions(request: web.Request) -> web.Response:
    """``GET /search?q=TEXT[&limit=N]``: the CLI's hits, with where each snippet matches."""
    text, limit = _search_query(request)
    state = state_of(request)

    def answer() -> dict[str, Any]:
        # The logs are the truth and nothing indexes on a turn's commit path: catch
        # up first (one manifest read and fstat per session when nothing changed).
        state.search.catch_up_all(state.store)
        result = state.search.search(text, limit=limit)
        # The CLI's answer, and where the matches are in each snippet (to highlight).
        hits = [{**hit.to_json(), "spans": list(hit.spans)} for hit in result.hits]
        label_hits(state.store, hits)
        return {"hits": hits, "total": result.total}

    return json_response(await asyncio.to_thread(answer))


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
    limit = whole_number(request, "limit", MAX_LIMIT) if "limit" in request.query else 20
    if limit == 0:
        raise InvalidRequest("limit must be at least 1", field="limit")
    return texts[0], limit
