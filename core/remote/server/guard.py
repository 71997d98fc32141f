"""The token check and typed refusals in front of every route.

Every request must carry the bearer token, and every refusal, whoever
raises it (a route, aiohttp's router, aiohttp's HTTP parser), is the typed
``{"error": {"code", "message"}}`` body: never a plain-text answer.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler

from branchwise.core.errors import (
    BodyTooLarge,
    BranchwiseError,
    InvalidRequest,
    RequestTooLarge,
    RouteNotFound,
    Unauthorized,
)
from branchwise.core.remote.protocol import MAX_HEADER_FIELD, MAX_REQUEST_LINE
from branchwise.core.remote.server.http_io import error_response, json_response
from branchwise.core.remote.server.state import state_of

log = logging.getLogger(__name__)


@web.middleware
async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
    """Refuse a request without the token; answer every error as typed JSON."""
    try:
        header = request.headers.get("Authorization", "")
        given = header[7:] if header.startswith("Bearer ") else ""
        # Constant time, so a wrong guess learns nothing from how long it took.
        if not hmac.compare_digest(given.encode(errors="replace"), state_of(request).token):
            raise Unauthorized("a valid bearer token is required")
        return await handler(request)
    except BranchwiseError as exc:
        return error_response(exc)
    except web.HTTPRequestEntityTooLarge:
        return error_response(BodyTooLarge("body too large"))
    except web.HTTPNotFound:
        return error_response(RouteNotFound("no such endpoint"))
    except web.HTTPMethodNotAllowed:
        return json_response(
            {"error": {"code": "invalid_request", "message": "method not allowed"}}, 405
        )
    except web.HTTPException as exc:
        code = "invalid_request" if exc.status < 500 else "internal_error"
        return json_response({"error": {"code": code, "message": exc.reason}}, exc.status)
    except Exception as exc:
        # Never a plain-text 500: a bug (or an untyped OS error) is still a typed answer.
        log.exception("%s %s failed", request.method, request.path)
        return json_response(
            {"error": {"code": "internal_error", "message": f"the server failed: {exc!r}"}},
            500,
        )


class _TypedErrorHandler(RequestHandler):
    """aiohttp's connection handler, answering what its parser refuses in the API's JSON.

    A request line or header over the limit, or bytes that are not HTTP, fail
    in aiohttp's parser before any middleware runs; aiohttp then answers a
    plain-text 400 and logs a traceback (it offers no hook: aio-libs/aiohttp#3287).
    Such a request is the client's mistake: it gets a typed JSON refusal and
    costs the log one line at ``INFO`` (silent unless logging is configured).
    """

    def handle_error(
        self,
        request: Any,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if not isinstance(exc, HttpProcessingError):
            super().handle_error(request, status, exc, message)  # a bug: keep its traceback
            response = error_response(BranchwiseError("internal server error"), 500)
        else:
            refusal, status = _parser_refusal(exc)
            self.logger.info("refused a request from %s: %s", request.remote, refusal.code)
            if request.writer.output_size > 0:  # as aiohttp: too late for another response
                raise ConnectionError("a response was already sent")
            response = error_response(refusal, status)
        response.force_close()
        return response


def _parser_refusal(exc: HttpProcessingError) -> tuple[BranchwiseError, int]:
    """The typed refusal and status for what aiohttp's parser refused."""
    if isinstance(exc, LineTooLong):
        limit = exc.args[1] if len(exc.args) > 1 else None
        if limit == MAX_REQUEST_LINE:
            return RequestTooLarge(f"the request line is over {MAX_REQUEST_LINE} bytes"), 414
        return RequestTooLarge(f"a request header is over {MAX_HEADER_FIELD} bytes"), 431
    status = exc.code if 400 <= exc.code < 500 else 400
    return InvalidRequest("the request is not well-formed HTTP"), status


class _TypedErrorServer(web.Server):
    """The low-level server, with :class:`_TypedErrorHandler` for each connection."""

    def __call__(self) -> RequestHandler:
        return _TypedErrorHandler(self, loop=self._loop, **self._kwargs)


class TypedErrorRunner(web.AppRunner):
    """An :class:`~aiohttp.web.AppRunner` whose connections answer parser errors in JSON."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        # The application builds a plain Server; only its connection handler class differs.
        server.__class__ = _TypedErrorServer
        return server
