"""Where a local model server states its model's context length, and how to read it.

The OpenAI API has no field for it, but the servers people run locally say it
in their own APIs, beside the OpenAI one (at the server's root, not under
``/v1``):

* LM Studio: ``GET /api/v0/models`` lists ``max_context_length`` per model id.
* Ollama: ``POST /api/show`` with ``{"model": …}`` answers ``model_info`` with
  ``<architecture>.context_length``.
* llama.cpp's server: ``GET /props`` answers ``default_generation_settings.n_ctx``
  (the context it was started with).

A server that is none of these answers 404 (or something unreadable) to all
three, and the window then shows token totals without a fill. Parsing is
here, Qt-free and network-free, so each shape is tested on its own; the
provider makes the calls (:meth:`~branchwise.core.providers.openai.OpenAIProvider.context_length`).
"""

from __future__ import annotations

from typing import Any

import orjson

MAX_BODY = 4 * 1024 * 1024
"""Bigger answers are not read (``/api/show`` carries the chat template, rarely more)."""


def server_root(base_url: str) -> str:
    """The server's root: the API root without a trailing ``/v1``."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def _json(body: bytes) -> Any:
    if len(body) > MAX_BODY:
        return None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def _positive(value: object) -> int | None:
    return value if type(value) is int and value > 0 else None


def lmstudio_context(body: bytes, model: str) -> int | None:
    """``max_context_length`` of ``model`` in an LM Studio ``/api/v0/models`` answer."""
    data = _json(body)
    models = data.get("data") if isinstance(data, dict) else None
    for entry in models if isinstance(models, list) else []:
        if isinstance(entry, dict) and entry.get("id") == model:
            return _positive(entry.get("max_context_length"))
    return None


def ollama_context(body: bytes) -> int | None:
    """``<architecture>.context_length`` in an Ollama ``/api/show`` answer."""
    data = _json(body)
    info = data.get("model_info") if isinstance(data, dict) else None
    if not isinstance(info, dict):
        return None
    architecture = info.get("general.architecture")
    if isinstance(architecture, str):
        found = _positive(info.get(f"{architecture}.context_length"))
        if found is not None:
            return found
    return next(
        (
            _positive(value)
            for key, value in info.items()
            if key.endswith(".context_length") and _positive(value)
        ),
        None,
    )


def llamacpp_context(body: bytes) -> int | None:
    """``default_generation_settings.n_ctx`` in a llama.cpp ``/props`` answer."""
    data = _json(body)
    settings = data.get("default_generation_settings") if isinstance(data, dict) else None
    return _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None
