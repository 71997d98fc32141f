"""The events route: the commits after a seq, held open (long-poll) until there are some.

The commits are the projection's wire view
(:func:`~branchwise.core.projection.remote_view.commits_after`): this route
reads a session's committed frames and hands them over; it names no event.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from branchwise.core.projection.remote_view import commits_after
from branchwise.core.remote.protocol import DEFAULT_WAIT, EVENTS_POLL, MAX_TURN_INDEX, MAX_WAIT
from branchwise.core.remote.server.http_io import json_response, query_params, session_of
from branchwise.core.remote.server.state import being_written, fingerprint, state_of


async def events(request: web.Request) -> web.Response:
    """``GET /sessions/{id}/events?after=SEQ&wait=S``: whole commits after ``SEQ``.

    Answers at once when there are some, else when ``wait`` seconds passed or
    the session started or stopped running a turn.
    """
    session_id = session_of(request)
    query = query_params(request, {"after": MAX_TURN_INDEX, "wait": MAX_WAIT})
    after, wait = query.get("after", 0), query.get("wait", DEFAULT_WAIT)
    state = state_of(request)
    store = state.store
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    after_running: bool | None = None
    while True:
        seen = fingerprint(store, session_id)
        snapshot = await asyncio.to_thread(store.read, session_id)
        # Whole commits, as committed: a turn's boundary is the end of its commit.
        fresh = commits_after(snapshot.scan.frames, after)
        running = state.is_running(session_id)
        if (
            fresh
            or loop.time() >= deadline
            or (after_running is not None and running != after_running)
        ):
            return json_response(
                {"commits": fresh, "lastSeq": snapshot.scan.last_seq, "running": running}
            )
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
