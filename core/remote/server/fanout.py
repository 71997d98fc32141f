"""Routes that fan a question out to several models and fuse their answers (``session-fanout-v1``).

``POST /sessions/{id}/fanout`` makes the branches (one journaled
operation, :mod:`~branchwise.core.conversation.fanout`) before it answers
anything, so every refusal (``invalid_fanout``, ``operation_conflict``,
``disk_full``, an unknown model, ``attachment_missing`` for a file this
server does not hold…) is an ordinary typed error reply and nothing is
half-made. Its ``attachments`` (``session-fanout-attachments-v1``) are
references ``POST /attachments`` answered, checked as a turn's are; every
branch's question carries them, and the journal compares them on a retry.
Then each branch is answered as a turn this server runs
(:class:`~branchwise.core.remote.turns.ServedTurns`: a client may stop one,
a killed server closes them ``interrupted`` at its next start), at most
:data:`~branchwise.core.fanout_run.PER_SERVER` at once, and the progress
streams back as NDJSON, in the lines ``session fanout`` writes to stderr,
ending with ``{"event": "result", "result": …}`` (its printed JSON).

``POST /sessions/{id}/fuse`` fuses as ``session fuse`` does
(:func:`~branchwise.core.fanout_run.fuse_answers`, with this server's
provider settings) and answers ``{"parentSessionId", "mergeSequence",
"created"}`` as it prints it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
from aiohttp import web

from branchwise.core.conversation.ask_again import branch_turn
from branchwise.core.conversation.fanout import Fanout, FanoutBranch, fan_out, fanout_targets
from branchwise.core.errors import BranchwiseError, InvalidRequest, UnknownTurn, error_class
from branchwise.core.fanout_run import (
    PER_SERVER,
    BranchOutcome,
    branches_line,
    ended_line,
    fanout_json,
    fuse_answers,
    require_models,
)
from branchwise.core.providers.demo import DEMO_MODEL, DemoProvider
from branchwise.core.remote.protocol import MAX_BODY, MAX_TURN_BODY, NDJSON, validate_fanout_body
from branchwise.core.remote.server.attachments import check_stored
from branchwise.core.remote.server.http_io import json_response, query_params, read_json, session_of
from branchwise.core.remote.server.state import ServerState, state_of

log = logging.getLogger(__name__)


async def fanout_session(request: web.Request) -> web.StreamResponse:
    """``POST /sessions/{id}/fanout``: make the branches, then stream their answers as NDJSON."""
    session_id = session_of(request)
    query_params(request, {})
    body = validate_fanout_body(await read_json(request, MAX_TURN_BODY))
    files = body["attachments"]
    await check_stored(request, files)
    state = state_of(request)
    store = state.store
    snapshot = await asyncio.to_thread(store.read, session_id, every_frame=False)
    conversation = snapshot.projection.settings
    provider, _ = state.served.setup(conversation)
    targets = fanout_targets(body["models"], body.get("samples"), provider.model or DEMO_MODEL)
    if not isinstance(provider, DemoProvider):
        await require_models(provider, [t.model for t in targets])
    fanout = await asyncio.to_thread(
        fan_out,
        store,
        session_id,
        body["prompt"],
        targets,
        body["operationId"],
        settings=conversation,
        attachments=files,
        cache=state.targets_cache,
    )
    response = web.StreamResponse(headers={"Content-Type": NDJSON})
    await response.prepare(request)
    lines: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    lines.put_nowait(branches_line(fanout))
    answering = asyncio.create_task(_answer_all(state, fanout, lines))
    # A client that goes away cancels only this handler: the answers run on as the server's turns.
    try:
        while (line := await lines.get()) is not None:
            await response.write(orjson.dumps(line) + b"\n")
        await response.write_eof()
    except ConnectionError:
        log.info("the client of the fan-out of %s went away; its answers run on", session_id)
    await asyncio.shield(answering)
    return response


async def _answer_all(
    state: ServerState, fanout: Fanout, lines: asyncio.Queue[dict[str, Any] | None]
) -> None:
    limit = asyncio.Semaphore(PER_SERVER)
    try:
        outcomes = await asyncio.gather(*(_answer(state, b, limit, lines) for b in fanout.branches))
        lines.put_nowait({"event": "result", "result": fanout_json(fanout, list(outcomes))})
    finally:
        lines.put_nowait(None)


async def _answer(
    state: ServerState,
    branch: FanoutBranch,
    limit: asyncio.Semaphore,
    lines: asyncio.Queue[dict[str, Any] | None],
) -> BranchOutcome:
    outcome = await _answer_branch(state, branch, limit, lines)
    lines.put_nowait(ended_line(outcome))
    return outcome


async def _answer_branch(
    state: ServerState,
    branch: FanoutBranch,
    limit: asyncio.Semaphore,
    lines: asyncio.Queue[dict[str, Any] | None],
) -> BranchOutcome:
    session_id, store = branch.session_id, state.store
    try:
        turn = await asyncio.to_thread(_own_turn, state, session_id)
        if turn is None or not turn.is_open:  # a retry: answered before
            return BranchOutcome(branch, turn.turn_id if turn else None, _reason(turn))
        if limit.locked():
            lines.put_nowait({"event": "queued", "sessionId": session_id})
        async with limit:
            target = branch.target
            try:
                stream = await state.served.start(
                    session_id, None, demo_as=(target.model, target.sample)
                )
            except UnknownTurn:  # its answer had started before a crash: close it interrupted
                await asyncio.to_thread(lambda: store.open_writer(session_id).close())
                turn = await asyncio.to_thread(_own_turn, state, session_id)
                return BranchOutcome(branch, turn.turn_id if turn else None, _reason(turn))
            return await _relay(branch, stream.queue, lines)
    except BranchwiseError as exc:
        return BranchOutcome(branch, None, "error", exc)


async def _relay(
    branch: FanoutBranch,
    records: asyncio.Queue[dict[str, Any] | None],
    lines: asyncio.Queue[dict[str, Any] | None],
) -> BranchOutcome:
    """Pass one served turn's records on as the branch's progress lines; how it ended."""
    session_id = branch.session_id
    outcome = BranchOutcome(branch, None, "error", BranchwiseError("the turn ended unseen"))
    while (record := await records.get()) is not None:
        kind = record["type"]
        if kind == "started":
            lines.put_nowait(
                {"event": "started", "sessionId": session_id, "turnId": record["turnId"]}
            )
        elif kind == "text":
            lines.put_nowait({"event": "text", "sessionId": session_id, "chunk": record["chunk"]})
        elif kind == "ended":
            result = record["result"]
            error = result.get("error")
            failure = _failure(error) if isinstance(error, dict) else None
            outcome = BranchOutcome(branch, result["turnId"], result["endReason"], failure)
        elif kind == "error":
            outcome = BranchOutcome(branch, None, "error", _failure(record["error"]))
    return outcome


def _failure(error: dict[str, Any]) -> BranchwiseError:
    """The typed error a served turn's record names (its code, message and details)."""
    code = str(error.get("code"))
    details = {k: v for k, v in error.items() if k not in ("code", "message")}
    failure = (error_class(code) or BranchwiseError)(str(error.get("message", "")), **details)
    failure.code = code
    return failure


def _own_turn(state: ServerState, session_id: str) -> Any:
    snapshot = state.store.read(session_id, every_frame=False)
    return branch_turn(snapshot.projection, snapshot.manifest.seed_length)


def _reason(turn: Any) -> str | None:
    return None if turn is None else turn.end_reason


async def fuse_session(request: web.Request) -> web.Response:
    """``POST /sessions/{id}/fuse``: ``{"parentSessionId", "mergeSequence", "created"}``."""
    parent_id = session_of(request)
    query_params(request, {})
    body = await read_json(request, MAX_BODY * 4)
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object")
    branches, operation_id = body.get("from"), body.get("operationId")
    model, instruction = body.get("model"), body.get("instruction")
    if not isinstance(branches, list) or not all(isinstance(b, str) for b in branches):
        raise InvalidRequest("from must be a list of session ids", field="from")
    if not isinstance(operation_id, str):
        raise InvalidRequest("operationId must be a string", field="operationId")
    if model is not None and not isinstance(model, str):
        raise InvalidRequest("model must be a string", field="model")
    if instruction is not None and not isinstance(instruction, str):
        raise InvalidRequest("instruction must be a string", field="instruction")
    state = state_of(request)
    merged = await fuse_answers(
        state.store,
        parent_id,
        branches,
        operation_id,
        instruction=instruction,
        provider_for=lambda settings: state.served.setup(settings)[0],
        model=model,
    )
    return json_response(merged.to_json())
