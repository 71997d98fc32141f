"""The events route: the commits after a seq, held open (long-poll) until there are some.

The commits are the projection's wire view
(:class:`~branchwise.core.projection.remote_view.WireLogs`, kept in the
server's state between requests, so a poll costs what is after its ``after``):
this route hands them over; it names no event.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from branchwise.core.errors import InvalidRequest
from branchwise.core.projection.remote_view import WireAnswer
from branchwise.core.remote.protocol import (
    DEFAULT_WAIT,
    EVENTS_POLL,
    MAX_PAGE,
    MAX_TURN_INDEX,
    MAX_WAIT,
)
from branchwise.core.remote.server.http_io import json_response, query_params, session_of
from branchwise.core.remote.server.state import (
    ServerState,
    being_written,
    fingerprint,
    state_of,
)
from branchwise.core.store.manifest import load_manifest


def _answer(
    state: ServerState, session_id: str, after: int, last_turns: int | None = None
) -> WireAnswer:
    """The wire commits after ``after`` (or of the last turns), from the session's kept replay."""
    directory = state.store.session_dir(session_id)
    manifest = load_manifest(directory)
    return state.wire_logs.answer(
        directory, manifest, manifest.generation, after=after, last_turns=last_turns
    )


async def events(request: web.Request) -> web.Response:
    """``GET /sessions/{id}/events?after=SEQ&wait=S``: whole commits after ``SEQ``.

    Answers at once when there are some, else when ``wait`` seconds passed or
    the session started or stopped running a turn.

    ``?lastTurns=K`` (``session-events-last-turns-v1``) answers at once with
    the commits of the last ``K`` turns and the ``after`` they follow (0: the
    session has no more turns than that, so every commit), so a client shows
    a big conversation's last page first and then polls from ``lastSeq``.
    """
    session_id = session_of(request)
    query = query_params(
        request, {"after": MAX_TURN_INDEX, "wait": MAX_WAIT, "lastTurns": MAX_PAGE}
    )
    state = state_of(request)
    if "lastTurns" in query:
        if "after" in query or "wait" in query:
            raise InvalidRequest(
                "lastTurns is asked alone: not with after or wait", field="lastTurns"
            )
        if query["lastTurns"] < 1:
            raise InvalidRequest("lastTurns must be at least 1", field="lastTurns")
        page = await asyncio.to_thread(_answer, state, session_id, 0, query["lastTurns"])
        return json_response(
            {
                "after": page.after,
                "commits": page.commits,
                "lastSeq": page.last_seq,
                "running": state.is_running(session_id),
            }
        )
    after, wait = query.get("after", 0), query.get("wait", DEFAULT_WAIT)
    store = state.store
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    after_running: bool | None = None
    while True:
        seen = fingerprint(store, session_id)
        # Whole commits, as committed: a turn's boundary is the end of its commit.
        answer = await asyncio.to_thread(_answer, state, session_id, after)
        fresh = answer.commits
        running = state.is_running(session_id)
        if (
            fresh
            or loop.time() >= deadline
            or (after_running is not None and running != after_running)
        ):
            return json_response({"commits": fresh, "lastSeq": answer.last_seq, "running": running})
        after_running = running
        # Long-poll: wake when the session's files change (any writer, any process) or
        # when its writer lets go (another app closed it: it can be written from here);
        # a client that went away ends the wait (aiohttp does not cancel handlers).
        while (
            fingerprint(store, session_id) == seen
            and loop.time() < deadline
            and being_written(store, session_id) == running
        ):
            transport = request.transport
            if transport is None or transport.is_closing():
                return json_response({"commits": [], "lastSeq": after, "running": False})  # unread
            await asyncio.sleep(EVENTS_POLL)
