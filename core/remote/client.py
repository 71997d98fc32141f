"""The client of ``branchwise serve``: fork targets and forks over HTTP.

Typed refusals from the server come back as :class:`RemoteRefusal` carrying
the server's own ``code`` (definitive: the fork did not happen). Anything
that leaves the outcome unknown — timeouts, dropped connections, replies that
do not decode — is :class:`RemoteUnavailable`, so the operations journal keeps
its record and retries with the same operation id.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from branchwise.core.errors import RemoteRefusal, RemoteUnavailable, ServerUnsupported
from branchwise.core.fork.engine import ForkResult
from branchwise.core.ids import validate_session_id
from branchwise.core.remote.protocol import CAP_FORK_TARGETS, EXPECTED_SESSION_HEADER


class RemoteStore:
    """One remote Branchwise server.

    Args:
        base_url: e.g. ``http://127.0.0.1:8765``.
        token: the server's bearer token.
        timeout: seconds for connecting and for each read.
    """

    def __init__(self, base_url: str, token: str, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._timeout = httpx.Timeout(timeout)

    def __repr__(self) -> str:
        return f"RemoteStore({self.base_url!r})"

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        headers = {"Authorization": f"Bearer {self._token}", **kwargs.pop("headers", {})}
        try:
            async with httpx.AsyncClient(timeout=self._timeout) as client:
                response = await client.request(
                    method, self.base_url + path, headers=headers, **kwargs
                )
        except httpx.TimeoutException as exc:
            raise RemoteUnavailable(f"{self.base_url} did not answer in time") from exc
        except httpx.HTTPError as exc:
            raise RemoteUnavailable(f"{self.base_url} could not be reached: {exc}") from exc
        try:
            body = orjson.loads(response.content)
        except orjson.JSONDecodeError as exc:
            raise RemoteUnavailable(
                f"{self.base_url} sent an undecodable reply (HTTP {response.status_code})"
            ) from exc
        if response.status_code >= 400:
            error = body.get("error") if isinstance(body, dict) else None
            if isinstance(error, dict) and isinstance(error.get("code"), str):
                raise RemoteRefusal(
                    error["code"], str(error.get("message", "")), response.status_code
                )
            raise RemoteUnavailable(f"{self.base_url} answered HTTP {response.status_code}")
        return body

    async def capabilities(self) -> list[str]:
        """What the server advertises."""
        body = await self._request("GET", "/capabilities")
        caps = body.get("capabilities") if isinstance(body, dict) else None
        if not isinstance(caps, list):
            raise RemoteUnavailable(f"{self.base_url} sent a malformed capabilities reply")
        return [c for c in caps if isinstance(c, str)]

    async def require_fork_targets(self) -> None:
        """Raise :class:`ServerUnsupported` unless the server can answer fork targets."""
        if CAP_FORK_TARGETS not in await self.capabilities():
            raise ServerUnsupported(f"{self.base_url} does not support fork targets")

    async def fork_targets(self, session_id: str) -> dict[str, Any]:
        """The §3.1 answer for a remote session."""
        session_id = validate_session_id(session_id)
        body = await self._request(
            "GET",
            f"/sessions/{session_id}/fork-targets",
            headers={EXPECTED_SESSION_HEADER: session_id},
        )
        if not isinstance(body, dict) or not isinstance(body.get("targets"), list):
            raise RemoteUnavailable(f"{self.base_url} sent a malformed fork-targets reply")
        return body

    async def fork(
        self,
        source_id: str,
        turn_id: str,
        boundary_sequence: int,
        expected_generation: int,
        operation_id: str,
    ) -> ForkResult:
        """``POST /fork-session``; idempotent per ``operation_id``."""
        body = await self._request(
            "POST",
            "/fork-session",
            content=orjson.dumps(
                {
                    "sourceSessionId": validate_session_id(source_id),
                    "turnId": turn_id,
                    "boundarySequence": boundary_sequence,
                    "expectedGeneration": expected_generation,
                    "operationId": operation_id,
                }
            ),
            headers={"Content-Type": "application/json"},
        )
        child = body.get("childSessionId") if isinstance(body, dict) else None
        created = body.get("created") if isinstance(body, dict) else None
        if not isinstance(child, str) or not isinstance(created, bool):
            raise RemoteUnavailable(f"{self.base_url} sent a malformed fork reply")
        return ForkResult(validate_session_id(child), created, operation_id)
