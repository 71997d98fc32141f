"""Routes that branch: where a session can be forked, and the fork itself.

Both read committed frames only and take no lease, so a session a desktop
is writing can be forked remotely while it streams.
"""

from __future__ import annotations

import asyncio

import orjson
from aiohttp import web

from branchwise.core.conversation.names import new_branch_label_from_store
from branchwise.core.conversation.views import session_targets
from branchwise.core.errors import SessionMismatch
from branchwise.core.fork.engine import ForkCall
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.remote.protocol import EXPECTED_SESSION_HEADER, MAX_BODY, validate_fork_body
from branchwise.core.remote.server.http_io import (
    json_response,
    query_params,
    read_json,
    session_of,
)
from branchwise.core.remote.server.state import state_of
from branchwise.core.store.manifest import BranchOrigin


async def targets(request: web.Request) -> web.Response:
    """``GET /sessions/{id}/fork-targets``: where a fork may cut (a header names the id)."""
    session_id = session_of(request)
    query_params(request, {})
    if request.headers.get(EXPECTED_SESSION_HEADER) != session_id:
        raise SessionMismatch(f"{EXPECTED_SESSION_HEADER} must name {session_id}")
    state = state_of(request)
    answer = await asyncio.to_thread(session_targets, state.store, session_id, state.targets_cache)
    return json_response(answer)


async def fork_session(request: web.Request) -> web.Response:
    """``POST /fork-session``: a new child of a session, once per operation id."""
    query_params(request, {})
    body = validate_fork_body(await read_json(request, MAX_BODY))
    fork_request = ForkRequest(
        source_session_id=body["sourceSessionId"],
        turn_id=body["turnId"],
        boundary_sequence=body["boundarySequence"],
        expected_generation=body["expectedGeneration"],
        origin=BranchOrigin.from_json(body.get("origin")),
    )
    state = state_of(request)
    label, turn = await asyncio.to_thread(
        new_branch_label_from_store,
        state.store,
        fork_request.source_session_id,
        fork_request.turn_id,
        fork_request.origin,
        cache=state.targets_cache,
    )
    call = ForkCall(fork_request, body["operationId"], body.get("title"), label, turn)
    in_flight = state.forks_in_flight
    # A retry of an operation in flight here waits for it rather than building the same
    # child again only to find it published (the store's idempotency still decides).
    asked = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    running = in_flight.get(body["operationId"])
    if running is not None and running[0] == asked:
        try:
            result = await asyncio.shield(running[1])
        except Exception:  # noqa: BLE001 - its refusal may not be ours: ask for ourselves
            pass
        else:
            return json_response({"childSessionId": result.child_session_id, "created": False})
    # Forks asked at once are made durable together, their sources' replays and
    # seed plans shared in the targets cache.
    future = asyncio.ensure_future(state.fork_groups.fork(call))
    mine = (asked, future)
    in_flight.setdefault(body["operationId"], mine)
    try:
        result = await future
    finally:
        if in_flight.get(body["operationId"]) is mine:
            del in_flight[body["operationId"]]
    return json_response({"childSessionId": result.child_session_id, "created": result.created})
