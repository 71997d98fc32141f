"""The client of ``branchwise serve``: sessions, turns, fork targets and forks over HTTP.

Typed refusals from the server come back as :class:`RemoteRefusal` carrying
the server's own ``code`` (definitive: the fork did not happen). Anything
that leaves the outcome unknown — timeouts, dropped connections, replies that
do not decode — is :class:`RemoteUnavailable`, so the operations journal keeps
its record and retries with the same operation id.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from branchwise.core.errors import (
    AttachmentMissing,
    BranchwiseError,
    InvalidServerUrl,
    RemoteRefusal,
    RemoteUnavailable,
    ServerUnsupported,
)
from branchwise.core.fork.engine import ForkResult
from branchwise.core.ids import validate_session_id
from branchwise.core.projection.attachments import AttachmentRef, is_sha256
from branchwise.core.remote.protocol import (
    CAP_FANOUT,
    CAP_FANOUT_ATTACHMENTS,
    CAP_FORK_TARGETS,
    CAP_MODELS,
    EXPECTED_SESSION_HEADER,
)
from branchwise.core.search.query import SearchHit, SearchResult
from branchwise.core.store.manifest import BranchOrigin

TURN_READ_TIMEOUT = 300.0
"""Seconds a turn's stream may stay silent: a model server may think long before a token."""


def server_url(value: str) -> str:
    """``value`` as a server's base URL (``http(s)://host[:port][/prefix]``, no trailing ``/``).

    Raises:
        InvalidServerUrl: not an http or https URL with a host.
    """
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
        raise InvalidServerUrl(
            f"{value[:200]!r} is not an http:// or https:// server address", url=value[:200]
        )
    return value.strip().rstrip("/")


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

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}", **(extra or {})}

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        headers = self._headers(kwargs.pop("headers", {}))
        try:
            async with httpx.AsyncClient(timeout=kwargs.pop("timeout", self._timeout)) as client:
                response = await client.request(
                    method, self.base_url + path, headers=headers, **kwargs
                )
        except httpx.TimeoutException as exc:
            raise RemoteUnavailable(f"{self.base_url} did not answer in time") from exc
        except httpx.HTTPError as exc:
            raise RemoteUnavailable(f"{self.base_url} could not be reached: {exc}") from exc
        return self._decode(response.status_code, response.content)

    def _decode(self, status: int, content: bytes) -> Any:
        """The JSON body of a reply; a typed refusal or ``RemoteUnavailable`` otherwise."""
        try:
            body = orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            raise RemoteUnavailable(
                f"{self.base_url} sent an undecodable reply (HTTP {status})"
            ) from exc
        if status >= 400:
            error = body.get("error") if isinstance(body, dict) else None
            if isinstance(error, dict) and isinstance(error.get("code"), str):
                refusal = RemoteRefusal(error["code"], str(error.get("message", "")), status)
                extra = {k: v for k, v in error.items() if k not in ("code", "message")}
                refusal.details = {**extra, **refusal.details}  # the server's fields, as sent
                raise refusal
            raise RemoteUnavailable(f"{self.base_url} answered HTTP {status}")
        return body

    async def _object(self, method: str, path: str, what: str, **kwargs: Any) -> dict[str, Any]:
        body = await self._request(method, path, **kwargs)
        if not isinstance(body, dict):
            raise RemoteUnavailable(f"{self.base_url} sent a malformed {what} reply")
        return body

    async def capabilities(self) -> list[str]:
        """What the server advertises."""
        body = await self._request("GET", "/capabilities")
        caps = body.get("capabilities") if isinstance(body, dict) else None
        if not isinstance(caps, list):
            raise RemoteUnavailable(f"{self.base_url} sent a malformed capabilities reply")
        return [c for c in caps if isinstance(c, str)]

    async def require_fork_targets(self) -> list[str]:
        """The server's capabilities; :class:`ServerUnsupported` unless it answers fork targets."""
        capabilities = await self.capabilities()
        if CAP_FORK_TARGETS not in capabilities:
            raise ServerUnsupported(f"{self.base_url} does not support fork targets")
        return capabilities

    async def fork_targets(self, session_id: str) -> dict[str, Any]:
        """The fork-targets answer for a remote session."""
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
        turn_id: str | None,
        boundary_sequence: int,
        expected_generation: int,
        operation_id: str,
        title: str | None = None,
        origin: BranchOrigin | None = None,
    ) -> ForkResult:
        """``POST /fork-session``; idempotent per ``operation_id``.

        ``title`` names the child it creates; send it only to a server that
        advertises ``session-fork-title-v1`` (an older one refuses the field).
        ``origin`` publishes the child with an edit's or a regenerate's prompt
        (``turn_id`` ``None``: at the start); only to a server that advertises
        ``session-fork-origin-v1``.
        """
        fields: dict[str, Any] = {
            "sourceSessionId": validate_session_id(source_id),
            "turnId": turn_id,
            "boundarySequence": boundary_sequence,
            "expectedGeneration": expected_generation,
            "operationId": operation_id,
        }
        if title is not None:
            fields["title"] = title
        if origin is not None:
            fields["origin"] = origin.to_json()
        body = await self._request(
            "POST",
            "/fork-session",
            content=orjson.dumps(fields),
            headers={"Content-Type": "application/json"},
        )
        child = body.get("childSessionId") if isinstance(body, dict) else None
        created = body.get("created") if isinstance(body, dict) else None
        if not isinstance(child, str) or not isinstance(created, bool):
            raise RemoteUnavailable(f"{self.base_url} sent a malformed fork reply")
        return ForkResult(validate_session_id(child), created, operation_id)

    async def list_sessions(self) -> dict[str, Any]:
        """``GET /sessions``: the ``session list`` answer plus ``updatedAt`` and ``running``."""
        body = await self._object("GET", "/sessions", "session list")
        if not isinstance(body.get("sessions"), list):
            raise RemoteUnavailable(f"{self.base_url} sent a malformed session list reply")
        return body

    async def create_session(self, title: str = "") -> dict[str, Any]:
        """``POST /sessions``: ``{"sessionId", "title"}``."""
        return await self._object(
            "POST",
            "/sessions",
            "new session",
            content=orjson.dumps({"title": title}),
            headers={"Content-Type": "application/json"},
        )

    async def show(
        self, session_id: str, *, offset: int | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        """``GET /sessions/{id}``: the ``session show`` answer (one page with ``limit``)."""
        params = {
            name: str(value)
            for name, value in (("offset", offset), ("limit", limit))
            if value is not None
        }
        body = await self._object(
            "GET", f"/sessions/{validate_session_id(session_id)}", "session", params=params
        )
        if not isinstance(body.get("turns"), list) or not isinstance(body.get("messages"), list):
            raise RemoteUnavailable(f"{self.base_url} sent a malformed session reply")
        return body

    async def events(self, session_id: str, after: int, wait: int = 20) -> dict[str, Any]:
        """``GET /sessions/{id}/events``: commits after seq ``after``, waiting up to ``wait`` s."""
        body = await self._object(
            "GET",
            f"/sessions/{validate_session_id(session_id)}/events",
            "events",
            params={"after": str(after), "wait": str(wait)},
            timeout=httpx.Timeout(self._timeout.connect, read=wait + 30.0),
        )
        commits = body.get("commits")
        if not isinstance(commits, list) or not all(isinstance(c, list) for c in commits):
            raise RemoteUnavailable(f"{self.base_url} sent a malformed events reply")
        return body

    async def last_turns_events(self, session_id: str, turns: int) -> dict[str, Any]:
        """``GET /sessions/{id}/events?lastTurns=K``: the commits of the last ``turns`` turns.

        The reply is the events reply plus ``after``, the seq those commits
        follow (0 when the session has no more turns, so they are all of it):
        a big conversation's last page arrives without its whole history, and
        :meth:`events` from ``lastSeq`` follows it. Ask only a server that
        advertises ``session-events-last-turns-v1``; an older one refuses the
        parameter (``invalid_request``).
        """
        body = await self._object(
            "GET",
            f"/sessions/{validate_session_id(session_id)}/events",
            "events",
            params={"lastTurns": str(turns)},
        )
        commits, after = body.get("commits"), body.get("after")
        if (
            not isinstance(commits, list)
            or not all(isinstance(c, list) for c in commits)
            or not isinstance(after, int)
            or isinstance(after, bool)
        ):
            raise RemoteUnavailable(f"{self.base_url} sent a malformed events reply")
        return body

    async def upload_attachment(self, name: str, data: bytes) -> AttachmentRef:
        """``POST /attachments``: store one file on the server; the reference a turn names.

        Raises:
            RemoteRefusal: the server refused the file (its typed code, e.g.
                ``attachment_unsupported`` or ``attachment_too_large``).
        """
        body = await self._object(
            "POST",
            "/attachments",
            "attachment",
            params={"name": name},
            content=data,
            headers={"Content-Type": "application/octet-stream"},
            timeout=httpx.Timeout(self._timeout.connect, read=TURN_READ_TIMEOUT),
        )
        try:
            return AttachmentRef.from_json(body)
        except BranchwiseError as exc:
            raise RemoteUnavailable(f"{self.base_url} sent a malformed attachment reply") from exc

    async def attachment(self, sha256: str) -> bytes:
        """``GET /attachments/{sha256}``: a stored file's bytes.

        Raises:
            RemoteRefusal: ``attachment_missing`` when the server does not hold it whole.
        """
        if not is_sha256(sha256):
            raise AttachmentMissing(f"{sha256!r} is not an attachment hash", sha256=str(sha256))
        try:
            async with httpx.AsyncClient(timeout=self._timeout) as client:
                response = await client.get(
                    f"{self.base_url}/attachments/{sha256}", headers=self._headers()
                )
        except httpx.HTTPError as exc:
            raise RemoteUnavailable(f"{self.base_url} could not be reached: {exc}") from exc
        if response.status_code >= 400:
            self._decode(response.status_code, response.content)
        return response.content

    async def send_turn(
        self,
        session_id: str,
        text: str | None,
        attachments: tuple[AttachmentRef, ...] = (),
    ) -> AsyncIterator[dict[str, Any]]:
        """``POST /sessions/{id}/turns``: the turn's records as they arrive.

        ``started``, ``text`` chunks, then ``ended`` with the ``session say``
        result, or ``error``. A stream that stops before ``ended`` raises
        :class:`RemoteUnavailable`: the turn may still run on the server.
        ``text`` ``None`` answers the question a branch was published with
        (``session-fork-origin-v1``).
        """
        path = f"/sessions/{validate_session_id(session_id)}/turns"
        finished = False
        async for record in self._post_lines(path, _turn_body(text, attachments), "type", "turn"):
            finished = record["type"] in ("ended", "error")
            yield record
        if not finished:
            raise RemoteUnavailable(f"{self.base_url} ended the turn's stream early")

    async def _post_lines(
        self, path: str, body: object, kind: str, what: str
    ) -> AsyncIterator[dict[str, Any]]:
        """POST ``body`` and yield the answer's JSON lines as they arrive (a turn, a fan-out).

        Each line must be an object naming its ``kind``; an error status, an
        undecodable or malformed line, a timeout or a dropped stream is
        :class:`RemoteUnavailable` (``what`` names the stream in the message).
        Whether the stream ended where it should is the caller's to judge.
        """
        timeout = httpx.Timeout(self._timeout.connect, read=TURN_READ_TIMEOUT)
        try:
            async with (
                httpx.AsyncClient(timeout=timeout) as client,
                client.stream(
                    "POST",
                    self.base_url + path,
                    headers=self._headers({"Content-Type": "application/json"}),
                    content=orjson.dumps(body),
                ) as response,
            ):
                if response.status_code >= 400:
                    self._decode(response.status_code, await response.aread())
                async for line in response.aiter_lines():
                    if not line.strip():
                        continue
                    try:
                        record = orjson.loads(line)
                    except orjson.JSONDecodeError as exc:
                        raise RemoteUnavailable(
                            f"{self.base_url} sent an undecodable {what} line"
                        ) from exc
                    if not isinstance(record, dict) or not isinstance(record.get(kind), str):
                        raise RemoteUnavailable(f"{self.base_url} sent a malformed {what} line")
                    yield record
        except httpx.TimeoutException as exc:
            raise RemoteUnavailable(f"{self.base_url} stopped answering mid-{what}") from exc
        except httpx.HTTPError as exc:
            raise RemoteUnavailable(f"{self.base_url} dropped the {what}'s stream: {exc}") from exc

    async def fanout(
        self,
        session_id: str,
        prompt: str,
        models: list[str],
        samples: int | None,
        operation_id: str,
        attachments: tuple[AttachmentRef, ...] = (),
    ) -> AsyncIterator[dict[str, Any]]:
        """``POST /sessions/{id}/fanout`` (``session-fanout-v1``): its progress lines, as sent.

        ``branches``, then each branch's ``queued``/``started``/``text``/``ended``,
        then ``result`` (the ``session fanout`` JSON). A stream that stops before
        ``result`` raises :class:`RemoteUnavailable`: the branches are made, and
        a retry with the same operation id (and the same files) finishes them.
        ``attachments`` are references :meth:`upload_attachment` answered, which
        every branch's question carries (``session-fanout-attachments-v1``).

        Raises:
            ServerUnsupported: the server has no fan-out, or none that takes files.
        """
        await self._require(CAP_FANOUT)
        path = f"/sessions/{validate_session_id(session_id)}/fanout"
        body: dict[str, Any] = {
            "prompt": prompt,
            "models": models,
            "samples": samples,
            "operationId": operation_id,
        }
        if attachments:  # absent without files: a server before them takes the body as before
            await self._require(CAP_FANOUT_ATTACHMENTS)
            body["attachments"] = [ref.to_json() for ref in attachments]
        finished = False
        async for record in self._post_lines(path, body, "event", "fan-out"):
            finished = record["event"] == "result"
            yield record
        if not finished:
            raise RemoteUnavailable(
                f"{self.base_url} ended the fan-out's stream early; retry with the same "
                "operation id to finish it",
                operationId=operation_id,
            )

    async def fuse(
        self,
        session_id: str,
        branches: list[str],
        operation_id: str,
        model: str | None = None,
        instruction: str | None = None,
    ) -> dict[str, Any]:
        """``POST /sessions/{id}/fuse``: ``{"parentSessionId", "mergeSequence", "created"}``."""
        await self._require(CAP_FANOUT)
        body: dict[str, Any] = {"from": branches, "operationId": operation_id}
        if model is not None:
            body["model"] = model
        if instruction is not None:
            body["instruction"] = instruction
        return await self._object(
            "POST",
            f"/sessions/{validate_session_id(session_id)}/fuse",
            "fuse",
            content=orjson.dumps(body),
            headers={"Content-Type": "application/json"},
            timeout=httpx.Timeout(self._timeout.connect, read=TURN_READ_TIMEOUT),
        )

    async def models(self) -> list[str]:
        """``GET /models`` (``models-v1``): the chat models this server's turns are answered by.

        Raises:
            ServerUnsupported: the server does not list them.
        """
        await self._require(CAP_MODELS)
        body = await self._object("GET", "/models", "model list")
        models = body.get("models")
        if not isinstance(models, list):
            raise RemoteUnavailable(f"{self.base_url} sent a malformed model list reply")
        return [m for m in models if isinstance(m, str)]

    async def _require(self, capability: str) -> None:
        if capability not in await self.capabilities():
            raise ServerUnsupported(f"{self.base_url} does not support {capability}")

    async def stop(self, session_id: str) -> dict[str, Any]:
        """``POST /sessions/{id}/stop``: ``{"stopped": bool}``."""
        return await self._object(
            "POST", f"/sessions/{validate_session_id(session_id)}/stop", "stop"
        )

    async def lineage(self, session_id: str) -> dict[str, Any]:
        """``GET /sessions/{id}/lineage``: the ``session lineage`` answer."""
        return await self._object(
            "GET", f"/sessions/{validate_session_id(session_id)}/lineage", "lineage"
        )

    async def tree(self, session_id: str) -> dict[str, Any]:
        """``GET /sessions/{id}/tree``: the ``session tree`` answer."""
        return await self._object(
            "GET", f"/sessions/{validate_session_id(session_id)}/tree", "tree"
        )

    async def family_map(self, session_id: str) -> dict[str, Any]:
        """``GET /sessions/{id}/map`` (``session-map-v1``): the ``session map`` answer."""
        return await self._object(
            "GET", f"/sessions/{validate_session_id(session_id)}/map", "family map"
        )

    async def rename(self, session_id: str, title: str) -> dict[str, Any]:
        """``POST /sessions/{id}/title``: ``{"sessionId", "title"}`` (the title as stored)."""
        return await self._object(
            "POST",
            f"/sessions/{validate_session_id(session_id)}/title",
            "rename",
            content=orjson.dumps({"title": title}),
            headers={"Content-Type": "application/json"},
        )

    async def rename_label(self, session_id: str, label: str) -> dict[str, Any]:
        """``POST /sessions/{id}/label``: ``{"sessionId", "title", "label", "labelParts",
        "forkTurnIndex"}`` as stored (a server advertising ``session-label-v1``)."""
        return await self._object(
            "POST",
            f"/sessions/{validate_session_id(session_id)}/label",
            "rename_label",
            content=orjson.dumps({"label": label}),
            headers={"Content-Type": "application/json"},
        )

    async def trash(self, session_id: str) -> dict[str, Any]:
        """``POST /sessions/{id}/trash``: ``{"trashed": [id]}`` (restorable on the server)."""
        return await self._object(
            "POST", f"/sessions/{validate_session_id(session_id)}/trash", "trash"
        )

    async def restore(self, session_id: str) -> dict[str, Any]:
        """``POST /sessions/{id}/restore``: ``{"restored": [id]}``."""
        return await self._object(
            "POST", f"/sessions/{validate_session_id(session_id)}/restore", "restore"
        )

    async def search(self, query: str, limit: int = 20) -> SearchResult:
        """``GET /search``: the server's hits, as core's :class:`SearchResult`."""
        body = await self._object(
            "GET", "/search", "search", params={"q": query, "limit": str(limit)}
        )
        try:
            hits = tuple(
                SearchHit(
                    session_id=validate_session_id(hit["sessionId"]),
                    title=str(hit["title"]),
                    turn_id=hit["turnId"] if isinstance(hit["turnId"], str) else None,
                    message_id=str(hit["messageId"]),
                    role=str(hit["role"]),
                    snippet=str(hit["snippet"]),
                    spans=tuple((int(a), int(b)) for a, b in hit.get("spans", ())),
                    also_in=tuple(validate_session_id(s) for s in hit["alsoIn"]),
                    written_in=validate_session_id(hit.get("writtenIn") or hit["sessionId"]),
                )
                for hit in body["hits"]
            )
            return SearchResult(hits, int(body["total"]))
        except (KeyError, TypeError, ValueError, BranchwiseError) as exc:
            raise RemoteUnavailable(f"{self.base_url} sent a malformed search reply") from exc


def _turn_body(text: str | None, attachments: tuple[AttachmentRef, ...]) -> dict[str, Any]:
    """A turn request: the prompt (with the references of files uploaded first), or the
    answer to a branch's published question."""
    if text is None:
        return {"answer": True}
    body: dict[str, Any] = {"text": text}
    if attachments:
        body["attachments"] = [ref.to_json() for ref in attachments]
    return body
