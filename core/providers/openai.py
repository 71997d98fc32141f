"""The OpenAI-compatible provider: streaming Chat Completions over SSE.

One client covers Ollama, llama.cpp's server, LM Studio, vLLM and hosted
OpenAI-compatible APIs, because they all speak ``POST /chat/completions`` with
``"stream": true``. Every way such a call can go wrong ends in a typed
:class:`~branchwise.core.errors.ProviderError` exception, never in a hang (connect
and read timeouts bound every wait) and never in a silently empty answer (a
reply only counts as finished when the server says so).

The server's address follows the base URL rule of
:func:`~branchwise.core.settings.normalize_base_url`, where the address is
kept.

The API key is sent only in the ``Authorization`` header. It is kept out of
``repr``, labels, error messages and error details; server error text is
scrubbed of it too, in case a server echoes it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import ssl
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from branchwise.core.errors import (
    EndpointNotFound,
    ModelListUnavailable,
    ModelNameRequired,
    ModelNotFound,
    ModelRejectsImages,
    ProviderAuthError,
    ProviderBadStream,
    ProviderError,
    ProviderHttpError,
    ProviderRateLimited,
    ProviderStreamCut,
    ProviderTimeout,
    ProviderUnreachable,
)
from branchwise.core.providers.base import StreamItem
from branchwise.core.providers.context_window import (
    llamacpp_context,
    lmstudio_context,
    ollama_context,
    server_root,
)
from branchwise.core.providers.openai_wire import (
    ChatStreamReader,
    ModelEntry,
    error_message,
    parse_model_list,
)
from branchwise.core.providers.sse import SSEDecoder, SSEProtocolError
from branchwise.core.settings import normalize_base_url

USER_AGENT = "Branchwise/0.1"
MAX_ERROR_BODY = 64 * 1024
MAX_JSON_BODY = 16 * 1024 * 1024
_NO_MODEL_LIST = frozenset({404, 405, 501})
"""Statuses of ``GET /models`` that mean "no list here", not "no API here"."""


def server_host(base_url: str) -> str:
    """``host[:port]`` of a base URL, without any user info; how messages name servers."""
    parts = urlsplit(base_url)
    host = parts.hostname or "?"
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{parts.port}" if parts.port else host


def _is_loopback(host: str | None) -> bool:
    return host in ("localhost", "127.0.0.1", "::1") or bool(host and host.startswith("127."))


class OpenAIProvider:
    """A model behind an OpenAI-compatible HTTP API.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:11434/v1`` (see the
            module docstring for the ``/v1`` rule).
        model: the model name to request. Empty means "the server's only
            model": it is looked up from the model list on first use.
        api_key: sent as a bearer token when given.
        connect_timeout: seconds to establish the connection.
        read_timeout: the longest silence tolerated between two pieces of the
            reply (the first one included, which covers a model still loading).
        client: a shared ``httpx.AsyncClient`` to reuse connections. Without
            it each call opens and closes its own, so the provider holds no
            event-loop-bound state and needs no closing.
        temperature: sent as ``temperature`` when set (otherwise the server decides).

    Attributes:
        model: the model name recorded on messages.
        label: how the UI names it, e.g. ``"llama3.2 @ 127.0.0.1:11434"``.
        base_url: the normalized API root.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        connect_timeout: float = 5.0,
        read_timeout: float = 60.0,
        client: httpx.AsyncClient | None = None,
        temperature: float | None = None,
    ) -> None:
        self.base_url = normalize_base_url(base_url)
        self.temperature = temperature
        self.host = server_host(self.base_url)
        self.model = model.strip()
        self._api_key = api_key or None
        self._timeout = httpx.Timeout(
            connect=connect_timeout, read=read_timeout, write=read_timeout, pool=connect_timeout
        )
        self._client = client
        self.label = self._make_label()

    def _make_label(self) -> str:
        return f"{self.model or 'default model'} @ {self.host}"

    def __repr__(self) -> str:
        key = ", api_key=<hidden>" if self._api_key else ""
        return f"OpenAIProvider(base_url={self.base_url!r}, model={self.model!r}{key})"

    # -- public calls ---------------------------------------------------------------

    async def list_models(self, *, include_embedding: bool = False) -> list[str]:
        """The model ids the server offers for chat, in its order.

        Embedding models (:func:`~branchwise.core.providers.openai_wire.is_embedding_model`)
        cannot chat and are left out unless ``include_embedding``.
        """
        entries = await self.model_entries()
        return [entry.id for entry in entries if include_embedding or not entry.embedding]

    async def model_entries(self) -> list[ModelEntry]:
        """The server's model list with ownership hints (``GET {base_url}/models``)."""
        async with self._client_cm() as client:
            try:
                response = await client.get(
                    self._url("/models"), headers=self._headers(), timeout=self._timeout
                )
                if response.status_code in _NO_MODEL_LIST:
                    raise self._no_model_list(response.status_code, response.content)
                if response.status_code >= 400:
                    raise self._http_error(response.status_code, response.headers, response.content)
                body = response.content
            except httpx.HTTPError as exc:
                raise self._transport_error(exc, started=False) from None
        if len(body) > MAX_JSON_BODY:
            raise ProviderBadStream(f"the model list from {self.host} is too large", host=self.host)
        return parse_model_list(body, self.host)

    async def context_length(self) -> int | None:
        """The model's context window as the server states it, or ``None`` if it does not.

        Asks the server's own APIs (:mod:`~branchwise.core.providers.context_window`):
        LM Studio's, then Ollama's, then llama.cpp's. Never raises: an answer
        that is missing, refused or unreadable only means "not stated".
        """
        if not self.model:
            return None
        root, model = server_root(self.base_url), self.model
        asks: tuple[tuple[str, str, bytes | None, Callable[[bytes], int | None]], ...] = (
            ("GET", "/api/v0/models", None, lambda body: lmstudio_context(body, model)),
            ("POST", "/api/show", orjson.dumps({"model": model}), ollama_context),
            ("GET", "/props", None, llamacpp_context),
        )
        timeout = httpx.Timeout(self._timeout.connect or 5.0)
        async with self._client_cm() as client:
            for method, path, content, read in asks:
                try:
                    response = await client.request(
                        method,
                        root + path,
                        content=content,
                        headers=self._headers(),
                        timeout=timeout,
                    )
                except httpx.HTTPError:
                    return None  # not reachable now: the next time asks again
                if response.status_code == 200:
                    found = read(response.content)
                    if found is not None:
                        return found
        return None

    async def stream(self, messages: Sequence[Mapping[str, str]]) -> AsyncIterator[StreamItem]:
        """Stream the answer to ``messages``: text chunks in order, then usage if sent.

        Raises a :class:`ProviderError` subclass for every failure, including
        a stream that ends before the server finished it. The per-chunk path
        is one generator deep on purpose: replies run to thousands of chunks.
        """
        if not self.model:
            try:
                models = await self.list_models()
            except ModelListUnavailable:
                raise ModelNameRequired(
                    f"{self.host} does not list its models, so none can be picked for you: "
                    "type the model name in Settings (or pass --model)",
                    host=self.host,
                ) from None
            if not models:
                raise ModelNotFound(f"{self.host} offers no models", host=self.host, status=404)
            self.model = models[0]
            self.label = self._make_label()
        # A prompt with attachments carries its OpenAI content parts (images as data URLs).
        wire_messages: list[dict[str, Any]] = [
            {"role": m["role"], "content": m.get("parts") or m["content"]} for m in messages
        ]
        async with self._client_cm() as client:
            try:
                response = await self._open_stream(client, wire_messages)
            except ProviderHttpError as exc:
                if _holds_image(wire_messages) and rejects_images(exc):
                    raise ModelRejectsImages(
                        f"{self.host}: the model {self.model!r} does not accept images"
                        f" ({exc.message})",
                        **exc.details,
                    ) from None
                raise
            reader = ChatStreamReader(self.host, self._redact)
            try:
                content_type = response.headers.get("content-type", "")
                if "json" in content_type and "event-stream" not in content_type:
                    # Some servers ignore "stream": answer the whole reply at once.
                    raw = await _read_limited(response, MAX_JSON_BODY)
                    for item in reader.whole_reply(raw):
                        yield item
                    return
                if content_type.startswith("text/html"):
                    raise ProviderBadStream(
                        f"{self.host} answered with a web page, not an event stream; "
                        "check that the server URL points at its OpenAI API (usually /v1)",
                        host=self.host,
                    )
                decoder = SSEDecoder()
                body = response.aiter_bytes()
                body_ended = False
                try:
                    async for raw in body:
                        for event in decoder.feed(raw):
                            chunk = reader.event(event.event, event.data)
                            if chunk is not None:
                                yield chunk
                            if reader.done:
                                break
                        if reader.done:
                            break
                    else:
                        body_ended = True
                finally:
                    if not body_ended:
                        await _release(body)
                if body_ended:
                    events, tail = decoder.close()
                    for event in events:
                        chunk = reader.event(event.event, event.data)
                        if chunk is not None:
                            yield chunk
                    reader.end_of_body(tail, got_bytes=response.num_bytes_downloaded > 0)
            except SSEProtocolError as exc:
                raise ProviderBadStream(f"{self.host}: {exc}", host=self.host) from None
            except httpx.HTTPError as exc:
                # After the server said "finished", a dropped connection loses nothing.
                if not reader.finished:
                    raise self._transport_error(exc, started=True, received=reader.chunks) from None
            finally:
                await response.aclose()
            for item in reader.final_items():
                yield item

    # -- internals ------------------------------------------------------------------

    async def _open_stream(
        self, client: httpx.AsyncClient, messages: list[dict[str, Any]]
    ) -> httpx.Response:
        """Send the request; the open streaming response, or the typed HTTP error."""
        include_usage = True
        while True:
            body: dict[str, Any] = {"model": self.model, "messages": messages, "stream": True}
            if self.temperature is not None:
                body["temperature"] = self.temperature
            if include_usage:
                body["stream_options"] = {"include_usage": True}
            headers = self._headers()
            headers["Accept"] = "text/event-stream"
            headers["Content-Type"] = "application/json"
            request = client.build_request(
                "POST",
                self._url("/chat/completions"),
                content=orjson.dumps(body),
                headers=headers,
                timeout=self._timeout,
            )
            try:
                response = await client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise self._transport_error(exc, started=False) from None
            if response.status_code < 400:
                return response
            try:
                raw = await _read_limited(response, MAX_ERROR_BODY)
            finally:
                await response.aclose()
            error = self._http_error(response.status_code, response.headers, raw)
            # A few strict servers reject the newer stream_options field; asking
            # again without it only loses the token counts.
            if include_usage and response.status_code == 400 and "stream_options" in error.message:
                include_usage = False
                continue
            raise error

    @asynccontextmanager
    async def _client_cm(self) -> AsyncIterator[httpx.AsyncClient]:
        if self._client is not None:
            yield self._client
            return
        # Proxy variables are for the outside world; a local model server is
        # reached directly even when a proxy is configured for everything else.
        trust_env = not _is_loopback(urlsplit(self.base_url).hostname)
        verify = _tls_context(
            trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
        )
        async with httpx.AsyncClient(
            timeout=self._timeout, trust_env=trust_env, verify=verify
        ) as client:
            yield client

    def _url(self, endpoint: str) -> str:
        return self.base_url + endpoint

    def _headers(self) -> dict[str, str]:
        headers = {"User-Agent": USER_AGENT}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _redact(self, text: str) -> str:
        if self._api_key and self._api_key in text:
            text = text.replace(self._api_key, "<hidden>")
        return text

    def _transport_error(
        self, exc: httpx.HTTPError, *, started: bool, received: int = 0
    ) -> ProviderError:
        host = self.host
        if isinstance(exc, httpx.ConnectTimeout):
            return ProviderUnreachable(
                f"could not connect to {host} within the connect timeout; "
                "is the server running and reachable?",
                host=host,
                reason="connect_timeout",
            )
        if isinstance(exc, httpx.TimeoutException):
            return ProviderTimeout(
                f"{host} stopped answering (no data within the read timeout)",
                host=host,
                receivedChunks=received,
            )
        if isinstance(exc, httpx.ConnectError):
            return ProviderUnreachable(
                f"could not connect to {host}: {self._redact(str(exc)) or 'connection failed'}; "
                "is the server running?",
                host=host,
                reason="connect_error",
            )
        if isinstance(exc, httpx.DecodingError):
            return ProviderBadStream(
                f"{host} sent a reply that cannot be decoded ({self._redact(str(exc))})",
                host=host,
                receivedChunks=received,
            )
        if started:
            return ProviderStreamCut(
                f"the connection to {host} closed before the reply was finished "
                f"(after {received} chunks)",
                host=host,
                receivedChunks=received,
            )
        if isinstance(exc, httpx.TransportError):
            return ProviderUnreachable(
                f"{host} closed the connection without answering "
                f"({self._redact(str(exc)) or type(exc).__name__})",
                host=host,
                reason="no_response",
            )
        return ProviderError(f"request to {host} failed: {self._redact(str(exc))}", host=host)

    def _no_model_list(self, status: int, raw: bytes) -> ModelListUnavailable:
        server_message = self._redact(error_message(raw))
        details: dict[str, Any] = {"host": self.host, "status": status}
        if server_message:
            details["serverMessage"] = server_message
        return ModelListUnavailable(
            f"{self.host} does not list its models at {urlsplit(self.base_url).path}/models "
            f"(HTTP {status}): type the model name, chatting works without the list; "
            "if chatting fails too, check the server URL (it usually ends in /v1)",
            **details,
        )

    def _http_error(self, status: int, headers: httpx.Headers, raw: bytes) -> ProviderHttpError:
        host = self.host
        server_message = self._redact(error_message(raw))
        said = f": {server_message}" if server_message else ""
        details: dict[str, Any] = {"host": host, "status": status}
        if server_message:
            details["serverMessage"] = server_message
        if status in (401, 403):
            hint = (
                "the API key was refused"
                if self._api_key
                else "it needs an API key (set one in Settings or BRANCHWISE_API_KEY)"
            )
            return ProviderAuthError(f"{host} said {status}: {hint}{said}", **details)
        if status == 404:
            if "model" in server_message.lower():
                return ModelNotFound(
                    f"{host} does not have the model {self.model!r}{said}",
                    model=self.model,
                    **details,
                )
            return EndpointNotFound(
                f"{host} has no OpenAI API at {urlsplit(self.base_url).path}; "
                f"check the server URL (it usually ends in /v1){said}",
                **details,
            )
        if status == 429:
            retry_after = headers.get("retry-after")
            if retry_after and retry_after.strip().isdigit():
                details["retryAfter"] = int(retry_after.strip())
            return ProviderRateLimited(f"{host} is rate limiting requests (429){said}", **details)
        return ProviderHttpError(f"{host} answered HTTP {status}{said}", **details)


_IMAGE_REFUSALS = (
    # OpenAI: "Invalid content type. image_url is only supported by certain models."
    "only supported by certain models",
    # LM Studio: "Model does not support images. Please use a model that does"
    "does not support images",
    # llama.cpp's server without a projector: "image input is not supported ..."
    "image input is not supported",
    # Ollama, a text model asked about an image: "... missing data required for image input"
    "required for image input",
    # Strict gateways: "unknown variant `image_url`, expected `text`"
    "unknown variant `image_url`",
    "vision is not supported",
    "does not support vision",
    "not a multimodal model",
)


def rejects_images(error: ProviderHttpError) -> bool:
    """Whether an HTTP refusal says the model cannot take images (as servers phrase it)."""
    if error.details.get("status") in (401, 403, 404, 429):
        return False
    text = str(error.details.get("serverMessage", error.message)).lower()
    return any(phrase in text for phrase in _IMAGE_REFUSALS)


def _holds_image(messages: Sequence[Mapping[str, Any]]) -> bool:
    return any(
        isinstance(part, Mapping) and part.get("type") == "image_url"
        for message in messages
        if isinstance(message.get("content"), list)
        for part in message["content"]
    )


async def _read_limited(response: httpx.Response, limit: int) -> bytes:
    """Up to ``limit`` bytes of the body; what arrived if the connection fails.

    Used for error bodies (best effort: the status already says what went
    wrong) and for whole JSON replies.
    """
    parts: list[bytes] = []
    size = 0
    body = response.aiter_bytes()
    try:
        async for raw in body:
            parts.append(raw)
            size += len(raw)
            if size >= limit:
                break
    except httpx.HTTPError:
        pass
    finally:
        await _release(body)
    return b"".join(parts)[:limit]


async def _release(body: AsyncIterator[bytes]) -> None:
    """Finish httpx's byte stream on this task when we stop reading it early.

    Breaking out of ``aiter_bytes()`` leaves a chain of suspended async
    generators (httpx, then httpcore); closing the outer one does not close
    the inner ones, which the garbage collector then finalizes on another
    task, where httpcore's cancel scopes fail ("async generator ignored
    GeneratorExit", tracebacks on stop or quit). A cancellation raised from
    inside the innermost read unwinds every layer here instead. A server that
    keeps the connection open after its last event is not waited for.
    """
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(0):
            async for _ in body:
                pass


@functools.lru_cache(maxsize=4)
def _tls_context(trust_env: bool, cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """One TLS context per way of trusting certificates, shared by every call.

    Building one loads the CA certificates (about 19 ms, holding the
    interpreter), which every stream of a fan-out paid again while the
    window waited. The certificate variables are part of the key, so a
    changed ``SSL_CERT_FILE`` is honoured as httpx would.
    """
    del cert_file, cert_dir  # read again by httpx; here they only key the cache
    return httpx.create_ssl_context(trust_env=trust_env)
