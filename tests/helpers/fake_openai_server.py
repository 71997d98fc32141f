"""A real OpenAI-compatible streaming server on 127.0.0.1, with knobs for failure.

It speaks ``POST /v1/chat/completions`` (SSE, ``stream: true``) and
``GET /v1/models`` like Ollama or llama.cpp's server do, and can misbehave on
demand: an HTTP error status with a JSON body, a stall past the client's read
timeout, a connection cut mid-stream, a garbage data line, no usage.

In a test::

    async with FakeOpenAIServer(chunks=["Hel", "lo"], usage=(3, 2)) as server:
        provider = OpenAIProvider(server.base_url, "fake-model")

As a process (for crash tests and benchmarks); the first stdout line is the
base URL, then it serves until SIGTERM/SIGINT::

    python tests/fake_openai_server.py --port 0 --chunks 10000 --delay 0
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

DEFAULT_CHUNKS = ("Hello", " from", " the", " fake", " server", ".")


@dataclass(frozen=True)
class Behaviour:
    """How the server answers chat completions; every knob defaults to "well".

    Attributes:
        chunks: the text pieces streamed, in order, one event each.
        delay: seconds before each chunk.
        status: answer with this HTTP status (and ``error_body``) instead of a stream.
        error_body: the error body for ``status``; default is the OpenAI shape
            ``{"error": {"message": error_message, ...}}``.
        error_message: the message inside the default error body.
        stall_after: after this many chunks, go silent for ``stall`` seconds.
        stall: how long a stall lasts (it ends early when the server stops).
        cut_after: after this many chunks, drop the connection (no ``[DONE]``).
        cut_mid_line: when cutting, first send half of the next event's line.
        garbage_after: after this many chunks, send ``garbage`` as a data line.
        garbage: the bad line's payload.
        usage: ``(prompt_tokens, completion_tokens)`` sent in a final chunk.
        finish: send a final chunk with ``finish_reason: "stop"``.
        done: send ``data: [DONE]``.
        content_type: the streamed reply's content type.
        require_key: answer 401 unless ``Authorization: Bearer <require_key>``.
        models: ids served by ``GET /v1/models``.
        list_models: ``False`` answers ``GET /v1/models`` with a plain 404 page, as
            servers that chat without listing models do.
        owned_by: the ``owned_by`` of every model (servers differ; detection reads it).
        model_fields: extra fields of some models' entries (``{"type": "embeddings"}``
            as LM Studio marks an embedding model).
        reject_stream_options: answer 400 naming ``stream_options`` when it is sent.
        whole_json: ignore ``stream`` and answer one JSON completion, as some servers do.
        retry_after: the ``Retry-After`` header sent with an error ``status``.
        raw_body: send exactly these bytes as the streamed body instead of chunks.
        context_length: the model's context window, stated the way ``kind`` states it.
        reject_images: answer 400 with this message to a request holding an
            ``image_url`` part for a model in ``text_only_models`` (as a text model's
            server does).
        text_only_models: the models that refuse images.
        kind: which server's own API states ``context_length``: ``"lmstudio"``
            (``GET /api/v0/models``), ``"ollama"`` (``POST /api/show``) or
            ``"llamacpp"`` (``GET /props``); the others answer 404, as they
            do on servers that are not that kind.
        per_model: open each streamed answer with ``"[<model>]"``, so answers differ per model.
        cut_models: models whose streams are dropped after two chunks (a server
            dying under one model while others answer).
    """

    chunks: Sequence[str] = DEFAULT_CHUNKS
    delay: float = 0.0
    status: int | None = None
    error_body: bytes | None = None
    error_message: str = "the fake server was told to fail"
    stall_after: int | None = None
    stall: float = 30.0
    cut_after: int | None = None
    cut_mid_line: bool = False
    garbage_after: int | None = None
    garbage: bytes = b"{this is not json"
    usage: tuple[int, int] | None = (5, 6)
    finish: bool = True
    done: bool = True
    content_type: str = "text/event-stream"
    require_key: str | None = None
    models: Sequence[str] = ("fake-model", "fake-model-2")
    list_models: bool = True
    owned_by: str = "fake"
    model_fields: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    reject_stream_options: bool = False
    whole_json: bool = False
    retry_after: int | None = None
    raw_body: bytes | None = None
    context_length: int | None = None
    kind: str = "llamacpp"
    reject_images: str | None = None
    text_only_models: Sequence[str] = ()
    per_model: bool = False
    cut_models: Sequence[str] = ()


class FakeOpenAIServer:
    """The server; an async context manager. ``configure`` changes knobs between calls.

    Args:
        host: where to listen.
        port: 0 picks a free port.
        knobs: :class:`Behaviour` fields.

    Attributes:
        behaviour: the current knobs.
        requests: every request received: ``{"method", "path", "headers", "json"}``.
        base_url: ``http://127.0.0.1:<port>/v1`` once started.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, **knobs: Any) -> None:
        self.behaviour = Behaviour(**knobs)
        self.host = host
        self.port = port
        self.requests: list[dict[str, Any]] = []
        self.record_path: Path | None = None
        self._runner: web.AppRunner | None = None
        self._stopping = asyncio.Event()

    def configure(self, **knobs: Any) -> None:
        """Change some knobs for the following requests."""
        self.behaviour = replace(self.behaviour, **knobs)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    async def start(self) -> FakeOpenAIServer:
        # Requests carrying attached images run to tens of megabytes, as real servers take.
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/api/v0/models", self._lmstudio_models)
        app.router.add_post("/api/show", self._ollama_show)
        app.router.add_get("/props", self._llamacpp_props)
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=0.2
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeOpenAIServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- handlers -------------------------------------------------------------------

    def _record(self, request: web.Request, body: Any) -> None:
        entry = {
            "method": request.method,
            "path": request.path,
            "headers": dict(request.headers),
            "json": body,
        }
        self.requests.append(entry)
        if self.record_path is not None:  # for a test in another process to read
            line = {"method": request.method, "path": request.path, "json": body}
            with self.record_path.open("ab") as out:
                out.write(orjson.dumps(line) + b"\n")

    def _auth_failure(self, request: web.Request) -> web.Response | None:
        key = self.behaviour.require_key
        if key is not None and request.headers.get("Authorization") != f"Bearer {key}":
            given = request.headers.get("Authorization", "")
            # Like some real servers, echo what was given: the client must scrub it.
            return _json_error(401, f"Incorrect API key provided: {given[7:]}")
        return None

    async def _models(self, request: web.Request) -> web.Response:
        self._record(request, None)
        refused = self._auth_failure(request)
        if refused is not None:
            return refused
        b = self.behaviour
        if not b.list_models:
            return web.Response(status=404, text="404 page not found")
        if b.status is not None:
            return _json_error(b.status, b.error_message, b.error_body)
        data = [
            {"id": m, "object": "model", "owned_by": b.owned_by, **b.model_fields.get(m, {})}
            for m in b.models
        ]
        return web.json_response({"object": "list", "data": data})

    def _states_context(self, request: web.Request, kind: str) -> bool:
        self._record(request, None)
        b = self.behaviour
        return b.kind == kind and b.context_length is not None

    async def _lmstudio_models(self, request: web.Request) -> web.Response:
        if not self._states_context(request, "lmstudio"):
            return web.Response(status=404, text="Unexpected endpoint or method.")
        data = [
            {
                "id": m,
                "object": "model",
                "type": "llm",
                "state": "loaded",
                "max_context_length": self.behaviour.context_length,
            }
            for m in self.behaviour.models
        ]
        return web.json_response({"object": "list", "data": data})

    async def _ollama_show(self, request: web.Request) -> web.Response:
        if not self._states_context(request, "ollama"):
            return web.Response(status=404, text="404 page not found")
        info = {
            "general.architecture": "llama",
            "llama.context_length": self.behaviour.context_length,
        }
        return web.json_response({"details": {"family": "llama"}, "model_info": info})

    async def _llamacpp_props(self, request: web.Request) -> web.Response:
        if not self._states_context(request, "llamacpp"):
            return web.Response(status=404, text="File Not Found")
        settings = {"n_ctx": self.behaviour.context_length, "temperature": 0.8}
        return web.json_response({"default_generation_settings": settings, "total_slots": 1})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self._record(request, body)
        b = self.behaviour
        refused = self._auth_failure(request)
        if refused is not None:
            return refused
        if b.status is not None:
            error = _json_error(b.status, b.error_message, b.error_body)
            if b.retry_after is not None:
                error.headers["Retry-After"] = str(b.retry_after)
            return error
        refuses = b.reject_images is not None and body.get("model") in b.text_only_models
        if refuses and b.reject_images is not None and _holds_image(body):
            return _json_error(400, b.reject_images)
        if b.reject_stream_options and "stream_options" in body:
            return _json_error(400, "unknown field: stream_options")
        model = body.get("model", "fake-model")
        if b.whole_json:
            message = {"role": "assistant", "content": "".join(b.chunks)}
            reply: dict[str, Any] = {
                "object": "chat.completion",
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
            if b.usage is not None:
                reply["usage"] = {"prompt_tokens": b.usage[0], "completion_tokens": b.usage[1]}
            return web.json_response(reply)
        response = web.StreamResponse(headers={"Content-Type": b.content_type})
        await response.prepare(request)
        write = response.write
        if b.raw_body is not None:
            await write(b.raw_body)
            await response.write_eof()
            return response
        prefix = (
            b'data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","model":'
            + orjson.dumps(model)
            + b',"choices":[{"index":0,"delta":{"content":'
        )
        suffix = b'},"finish_reason":null}]}\n\n'
        await write(
            b'data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","choices":'
            b'[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}\n\n'
        )
        chunks = (f"[{model}]", *b.chunks) if b.per_model else tuple(b.chunks)
        cut_after = 2 if model in b.cut_models else b.cut_after
        for index, text in enumerate(chunks):
            if cut_after is not None and index == cut_after:
                if b.cut_mid_line:
                    await write(prefix[: len(prefix) // 2])
                return await _cut(request, response)
            if b.garbage_after is not None and index == b.garbage_after:
                await write(b"data: " + b.garbage + b"\n\n")
            if b.stall_after is not None and index == b.stall_after:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), b.stall)
            if b.delay:
                await asyncio.sleep(b.delay)
            await write(prefix + orjson.dumps(text) + suffix)
        if cut_after is not None and cut_after >= len(chunks):
            return await _cut(request, response)
        if b.finish:
            await write(
                b'data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","choices":'
                b'[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
            )
        if b.usage is not None:
            usage = {"prompt_tokens": b.usage[0], "completion_tokens": b.usage[1]}
            usage["total_tokens"] = sum(b.usage)
            await write(
                b'data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","choices":[],'
                b'"usage":' + orjson.dumps(usage) + b"}\n\n"
            )
        if b.done:
            await write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _holds_image(body: Any) -> bool:
    return any(
        isinstance(part, dict) and part.get("type") == "image_url"
        for message in body.get("messages", [])
        if isinstance(message.get("content"), list)
        for part in message["content"]
    )


def _json_error(status: int, message: str, body: bytes | None = None) -> web.Response:
    if body is None:
        body = orjson.dumps({"error": {"message": message, "type": "fake_error", "code": status}})
    return web.Response(status=status, body=body, content_type="application/json")


async def _cut(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """Drop the connection without finishing the chunked body, like a crashed server."""
    transport = request.transport
    if transport is not None:
        transport.abort()
    return response


async def _serve_forever(server: FakeOpenAIServer) -> None:
    await server.start()
    print(server.base_url, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()


def main(argv: list[str] | None = None) -> None:
    """Run as a process; prints the base URL as the first stdout line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--chunks", type=int, help="stream this many chunks (' w0', ' w1', …)")
    parser.add_argument("--text", help="stream this text, one word per chunk")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--status", type=int)
    parser.add_argument("--stall-after", type=int)
    parser.add_argument("--stall", type=float, default=30.0)
    parser.add_argument("--cut-after", type=int)
    parser.add_argument("--garbage-after", type=int)
    parser.add_argument("--no-usage", action="store_true")
    parser.add_argument("--require-key")
    parser.add_argument("--models", help="comma-separated model ids")
    parser.add_argument("--no-model-list", action="store_true", help="404 on GET /v1/models")
    parser.add_argument(
        "--model-type", action="append", default=[], help='ID=TYPE: a model entry\'s "type"'
    )
    parser.add_argument("--record", type=Path, help="append each request as a JSON line here")
    parser.add_argument("--per-model", action="store_true", help="answers open with [model]")
    parser.add_argument("--cut-models", help="comma-separated models whose streams are cut")
    args = parser.parse_args(argv)
    knobs: dict[str, Any] = {
        "delay": args.delay,
        "status": args.status,
        "stall_after": args.stall_after,
        "stall": args.stall,
        "cut_after": args.cut_after,
        "garbage_after": args.garbage_after,
        "require_key": args.require_key,
        "list_models": not args.no_model_list,
        "per_model": args.per_model,
        "cut_models": tuple(m for m in (args.cut_models or "").split(",") if m),
    }
    if args.chunks is not None:
        knobs["chunks"] = tuple(f" w{i}" for i in range(args.chunks))
    elif args.text is not None:
        words = args.text.split(" ")
        knobs["chunks"] = tuple(w if i == 0 else " " + w for i, w in enumerate(words))
    if args.no_usage:
        knobs["usage"] = None
    if args.models:
        knobs["models"] = tuple(m for m in args.models.split(",") if m)
    if args.model_type:
        pairs = (item.split("=", 1) for item in args.model_type)
        knobs["model_fields"] = {model: {"type": kind} for model, kind in pairs}
    server = FakeOpenAIServer(port=args.port, **knobs)
    server.record_path = args.record
    asyncio.run(_serve_forever(server))


if __name__ == "__main__":
    main()
