"""A provider that streams exactly the chunks a test gives it (real provider code, no stub)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence

from branchwise.core.providers.base import StreamItem, TextChunk, Usage


class ScriptedProvider:
    """Streams ``chunks`` in order (empty ones too), then its usage.

    Args:
        chunks: the answer's pieces, as a model server would send them.
        pause: seconds to wait before each chunk (0 still yields to the loop).
    """

    label = "scripted"

    def __init__(self, chunks: Sequence[str], pause: float = 0.0, model: str = "scripted") -> None:
        self.chunks = list(chunks)
        self.pause = pause
        self.model = model

    async def stream(self, messages: Sequence[Mapping[str, str]]) -> AsyncIterator[StreamItem]:
        for chunk in self.chunks:
            await asyncio.sleep(self.pause)
            yield TextChunk(chunk)
        yield Usage(len(messages), len(self.chunks))

    async def list_models(self) -> list[str]:
        return [self.model]
