"""The Chat Completions wire format: stream chunks, model lists, error bodies.

Pure functions over bytes, separate from the HTTP plumbing in
:mod:`.openai`, so the per-chunk path is easy to read and to measure. Servers
differ in small ways (usage in the finish chunk or in a chunk of its own,
``{"error": "..."}`` vs ``{"error": {"message": ...}}`` vs ``{"detail": ...}``);
the readers here accept all the shapes seen in the wild.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from branchwise.core.errors import (
    ProviderBadStream,
    ProviderEmptyReply,
    ProviderRemoteError,
    ProviderStreamCut,
)
from branchwise.core.providers.base import StreamItem, TextChunk, Usage

DONE = b"[DONE]"


@dataclass(frozen=True, slots=True)
class ModelEntry:
    """One entry of a server's model list; ``owned_by`` hints at the server kind.

    ``embedding`` marks a model that makes embeddings and cannot chat: the
    model lists offered for chat leave it out unless asked for every model.
    """

    id: str
    owned_by: str | None = None
    embedding: bool = False


EMBEDDING_ID = re.compile(r"embed|(?:^|[/:_-])bge-|(?:^|[/:_-])e5-", re.IGNORECASE)
"""Ids that name an embedding model (``text-embedding-3-small``, ``nomic-embed-text``,
``mxbai-embed-large``, ``bge-m3``, ``multilingual-e5-large``), for servers that say nothing."""

_KIND_FIELDS = ("type", "model_type", "task", "mode")
_CHAT_CAPABILITIES = frozenset({"completion", "completions", "chat", "text-generation"})


def is_embedding_model(model_id: str, entry: Mapping[str, Any] | None = None) -> bool:
    """Whether a listed model only makes embeddings.

    The server's word wins when it gives one: a kind field (LM Studio's
    ``"type": "embeddings"``, others' ``model_type`` / ``task`` / ``mode``) or a
    ``capabilities`` list naming embedding and no chat. Otherwise the id decides
    (:data:`EMBEDDING_ID`).
    """
    if entry is not None:
        for name in _KIND_FIELDS:
            kind = entry.get(name)
            if isinstance(kind, str) and kind.strip():
                return "embed" in kind.lower()
        capabilities = entry.get("capabilities")
        if isinstance(capabilities, list) and capabilities:
            named = {str(c).lower() for c in capabilities}
            if named & _CHAT_CAPABILITIES:
                return False
            if any("embed" in c for c in named):
                return True
    return bool(EMBEDDING_ID.search(model_id))


class ChatStreamReader:
    """Turns chat-completion chunk payloads into stream items; tracks completion.

    Attributes:
        done: ``[DONE]`` was seen; nothing more will come.
        finished: a ``finish_reason`` or ``[DONE]`` was seen; the reply is whole.
        chunks: text chunks delivered so far.
        usage: the last token counts the server reported.
        events: JSON events read (tells an event stream from some other body).
    """

    __slots__ = ("host", "redact", "done", "finished", "chunks", "usage", "events")

    def __init__(self, host: str, redact: Callable[[str], str]) -> None:
        self.host = host
        self.redact = redact
        self.done = False
        self.finished = False
        self.chunks = 0
        self.usage: Usage | None = None
        self.events = 0

    def event(self, name: str, data: bytes) -> TextChunk | None:
        """Read one event (its name and data); the text it carries, if any.

        Raises the typed error for a payload that is not JSON, an error the
        server reports mid-stream, or JSON that is not a completion chunk.
        """
        if data == DONE:
            self.done = self.finished = True
            return None
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise ProviderBadStream(
                f"{self.host} sent a stream line that is not JSON: {self.redact(_excerpt(data))!r}",
                host=self.host,
                receivedChunks=self.chunks,
            ) from None
        self.events += 1
        if name == "error" or (isinstance(obj, dict) and obj.get("error")):
            raise ProviderRemoteError(
                f"{self.host} reported an error mid-stream: "
                f"{self.redact(_message_of(obj)) or 'unknown error'}",
                host=self.host,
                receivedChunks=self.chunks,
            )
        try:
            return self._chunk(obj)
        except (AttributeError, TypeError, KeyError, IndexError):
            raise ProviderBadStream(
                f"{self.host} sent a chunk that is not a chat completion: "
                f"{self.redact(_excerpt(data))!r}",
                host=self.host,
                receivedChunks=self.chunks,
            ) from None

    def _chunk(self, obj: dict[str, Any]) -> TextChunk | None:
        usage = obj.get("usage")
        if usage:
            self._read_usage(usage)
        choices = obj["choices"]
        if not choices:
            return None
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finished = True
        delta = choice.get("delta") or choice.get("message")
        if delta:
            text = delta.get("content")
            if text:
                if not isinstance(text, str):
                    raise TypeError("content is not text")
                self.chunks += 1
                return TextChunk(text)
        return None

    def _read_usage(self, usage: dict[str, Any]) -> None:
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and isinstance(completion, int):
            self.usage = Usage(input_tokens=prompt, output_tokens=completion)

    def whole_reply(self, raw: bytes) -> list[StreamItem]:
        """A non-streamed JSON reply from a server that ignored ``"stream"``."""
        chunk = self.event("message", raw)
        self.finished = True
        return [*([chunk] if chunk else []), *self.final_items()]

    def end_of_body(self, tail: bytes, got_bytes: bool) -> None:
        """The body ended without ``[DONE]``: was the reply whole?

        Args:
            tail: the unterminated last line, if any.
            got_bytes: whether the body had any bytes at all.
        """
        if tail.strip() in (b"data: [DONE]", b"data:[DONE]"):
            self.done = self.finished = True
        if self.finished:
            return
        if self.events == 0 and not got_bytes:
            raise ProviderStreamCut(
                f"{self.host} closed the stream without sending anything",
                host=self.host,
                receivedChunks=0,
            )
        if self.events == 0 and not tail.startswith(b"data:"):
            raise ProviderBadStream(
                f"{self.host} did not answer with an event stream; "
                "check that the server URL points at its OpenAI API (usually /v1)",
                host=self.host,
            )
        raise ProviderStreamCut(
            f"the stream from {self.host} ended before the reply was finished "
            f"(after {self.chunks} chunks)",
            host=self.host,
            receivedChunks=self.chunks,
        )

    def final_items(self) -> list[StreamItem]:
        """What follows the text of a whole reply: its usage, if the server sent it.

        A whole reply with no text at all is refused as :class:`ProviderEmptyReply`.
        """
        if self.chunks == 0:
            raise ProviderEmptyReply(f"{self.host} finished without any text", host=self.host)
        return [self.usage] if self.usage is not None else []


def parse_model_list(body: bytes, host: str) -> list[ModelEntry]:
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ProviderBadStream(
            f"{host} did not answer the model list with JSON; is this an OpenAI-compatible "
            "server URL (usually ending in /v1)?",
            host=host,
        ) from None
    items = obj.get("data") if isinstance(obj, dict) else None
    if items is None and isinstance(obj, dict):
        items = obj.get("models")
    if not isinstance(items, list):
        raise ProviderBadStream(f"{host} answered the model list in an unknown shape", host=host)
    entries: list[ModelEntry] = []
    seen: set[str] = set()
    for item in items:
        model_id: Any
        owner: Any = None
        fields: dict[str, Any] | None = None
        if isinstance(item, str):
            model_id = item
        elif isinstance(item, dict):
            model_id = item.get("id") or item.get("name") or item.get("model")
            owner = item.get("owned_by")
            fields = item
        else:
            continue
        if isinstance(model_id, str) and model_id and model_id not in seen:
            seen.add(model_id)
            entries.append(
                ModelEntry(
                    model_id,
                    owner if isinstance(owner, str) else None,
                    is_embedding_model(model_id, fields),
                )
            )
    return entries


def _message_of(obj: Any) -> str:
    """The human message inside the error shapes servers use."""
    if isinstance(obj, str):
        return obj
    if not isinstance(obj, dict):
        return ""
    for key in ("error", "detail", "message"):
        value = obj.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, dict):
            return _message_of(value)
        if isinstance(value, list) and value:
            return _message_of(value[0])
    return ""


def error_message(raw: bytes) -> str:
    if not raw:
        return ""
    try:
        message = _message_of(orjson.loads(raw))
    except orjson.JSONDecodeError:
        text = raw.decode("utf-8", "replace")
        if "<html" in text[:200].lower():
            return ""
        message = text
    return _excerpt(message.encode(), 300)


_SPACES = re.compile(r"\s+")


def _excerpt(data: bytes, limit: int = 120) -> str:
    text = _SPACES.sub(" ", data.decode("utf-8", "replace")).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"
