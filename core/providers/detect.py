"""Finding a model server, and choosing the provider the app talks to.

On first run nobody has configured anything, so the app looks for the usual
local servers (Ollama, LM Studio, llama.cpp, vLLM on their default ports) by
asking each for its model list. Anything that answers with a model list is a
candidate the UI can offer; when nothing answers, or nothing is configured,
the labelled offline demo responder keeps the app usable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

import httpx

from branchwise.core.errors import InvalidBaseUrl, ProviderAuthError, ProviderError
from branchwise.core.providers.base import Provider
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.providers.openai import OpenAIProvider
from branchwise.core.settings import Settings, demo_pace, normalize_base_url, resolve_api_key

OLLAMA_URL = "http://127.0.0.1:11434/v1"

DEFAULT_CANDIDATES: Mapping[str, str] = {
    OLLAMA_URL: "ollama",
    "http://127.0.0.1:1234/v1": "lmstudio",
    "http://127.0.0.1:8080/v1": "llama.cpp",
    "http://127.0.0.1:8000/v1": "vllm",
}
"""Where the common local servers listen by default, and which kind each is."""

_OWNER_KINDS = {
    "llamacpp": "llama.cpp",
    "vllm": "vllm",
    "organization_owner": "lmstudio",
    "library": "ollama",
}
"""``owned_by`` values that give a server away (from their ``/v1/models``)."""


@dataclass(frozen=True, slots=True)
class DetectedServer:
    """A server that answered the model-list probe.

    Attributes:
        base_url: its normalized API root.
        models: the model ids it offers (may be empty, e.g. Ollama with nothing pulled).
        kind: ``ollama``, ``lmstudio``, ``llama.cpp``, ``vllm`` or ``openai-compatible``.
        auth_required: it answered 401/403 without a key, so ``models`` is unknown.
    """

    base_url: str
    models: tuple[str, ...]
    kind: str
    auth_required: bool = False

    def to_json(self) -> dict[str, Any]:
        """The CLI / UI shape."""
        return {
            "baseUrl": self.base_url,
            "models": list(self.models),
            "kind": self.kind,
            "authRequired": self.auth_required,
        }


async def detect_servers(
    candidates: Sequence[str] | None = None, timeout: float = 1.0
) -> list[DetectedServer]:
    """Probe ``candidates`` (default: :data:`DEFAULT_CANDIDATES`) concurrently.

    Returns the servers that answered, in candidate order. Each probe is
    bounded by ``timeout`` seconds in total, so detection never stalls the
    app; invalid URLs and anything that is not an OpenAI model list are
    skipped. No API key is sent: a probe must not hand a secret to whatever
    happens to listen on a well-known port.
    """
    urls = _unique_urls(DEFAULT_CANDIDATES if candidates is None else candidates)
    if not urls:
        return []
    limits = httpx.Limits(max_connections=len(urls))
    async with httpx.AsyncClient(trust_env=False, limits=limits) as local_client:
        found = await asyncio.gather(*(_probe(url, timeout, local_client) for url in urls))
    return [server for server in found if server is not None]


def candidate_urls(settings: Settings, extra: Iterable[str] = ()) -> list[str]:
    """What to probe for ``settings``: the configured server first, then the defaults."""
    configured = [settings.base_url] if settings.base_url else []
    return _unique_urls([*configured, *extra, *DEFAULT_CANDIDATES])


def choose_provider(settings: Settings, environ: Mapping[str, str] | None = None) -> Provider:
    """The provider ``settings`` ask for; the demo responder unless a server is configured.

    The demo's ``label`` says it is the offline demo, so nobody mistakes its
    answers for a model's.
    """
    if not settings.configured:
        pace = demo_pace(settings, environ)
        return DemoProvider(delay=1 / pace if pace else 0.0)
    return OpenAIProvider(
        settings.base_url,
        settings.model,
        api_key=resolve_api_key(settings, environ),
        temperature=settings.temperature,
    )


def suggest_settings(settings: Settings, servers: Sequence[DetectedServer]) -> Settings | None:
    """First-run suggestion: the first detected server with a model, if none is configured.

    Returns ``None`` when a server is already configured or none is usable;
    the UI asks before saving the suggestion.
    """
    if settings.configured:
        return None
    for server in servers:
        if server.models:
            return replace(
                settings, provider="openai", base_url=server.base_url, model=server.models[0]
            )
    return None


async def _probe(
    url: str, timeout: float, local_client: httpx.AsyncClient
) -> DetectedServer | None:
    loopback = urlsplit(url).hostname in ("127.0.0.1", "localhost", "::1")
    provider = OpenAIProvider(
        url,
        "",
        connect_timeout=timeout,
        read_timeout=timeout,
        client=local_client if loopback else None,
    )
    kind = DEFAULT_CANDIDATES.get(url, "openai-compatible")
    try:
        async with asyncio.timeout(timeout):
            entries = await provider.model_entries()
    except ProviderAuthError:
        return DetectedServer(url, (), kind, auth_required=True)
    except (ProviderError, TimeoutError):
        return None
    for entry in entries:
        if entry.owned_by in _OWNER_KINDS:
            kind = _OWNER_KINDS[entry.owned_by]
            break
    return DetectedServer(url, tuple(entry.id for entry in entries if not entry.embedding), kind)


def _unique_urls(urls: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for url in urls:
        try:
            seen.setdefault(normalize_base_url(url), None)
        except InvalidBaseUrl:
            continue
    return list(seen)
