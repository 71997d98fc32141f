"""Reading a request's path, query and body, and writing JSON answers, the same way on every route.

Every route validates what it is given before it reads or writes anything;
a refusal is the typed ``{"error": {"code", "message"}}`` body.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from branchwise.core.errors import BodyTooLarge, BranchwiseError, InvalidRequest
from branchwise.core.ids import validate_session_id


def json_response(body: Any, status: int = 200) -> web.Response:
    """``body`` as a JSON answer."""
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def error_response(exc: BranchwiseError, status: int | None = None) -> web.Response:
    """The refusal as the CLI prints it: code, message and the error's own fields."""
    return json_response(exc.to_json(), status or exc.http_status)


def session_of(request: web.Request) -> str:
    """The session id in the request's path, validated."""
    return validate_session_id(request.match_info["session_id"])


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
        values[name] = whole_number(request, name, allowed[name])
    return values


def whole_number(request: web.Request, name: str, most: int) -> int:
    """The query parameter ``name``, given once, as a whole number ``0..most``."""
    text = request.query.getall(name)
    if len(text) != 1 or not text[0].isascii() or not text[0].isdigit():
        raise InvalidRequest(f"{name} must be a whole number", field=name)
    value = int(text[0]) if len(text[0]) <= 20 else most + 1
    if value > most:
        raise InvalidRequest(f"{name} must be at most {most}", field=name)
    return value
