"""The provider seam: an async stream of text chunks, then usage.

A provider knows how to talk to one kind of model server. The turn runner
only sees :class:`TextChunk` and :class:`Usage` items and typed
:class:`ProviderError` failures, so the demo responder and real HTTP
providers are interchangeable.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class TextChunk:
    """A piece of the streamed answer, in order."""

    text: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts for the call, when the server reports them."""

    input_tokens: int
    output_tokens: int


StreamItem = TextChunk | Usage


class Provider(Protocol):
    """What the turn runner needs from a model.

    Attributes:
        model: the model name recorded on assistant messages and usage.
        label: how the UI names this provider and model to people.
    """

    model: str
    label: str

    def stream(self, messages: Sequence[Mapping[str, str]]) -> AsyncIterator[StreamItem]:
        """Answer ``messages`` (``{"role", "content"}``) as a stream of items."""
        ...

    async def list_models(self) -> list[str]:
        """The model names this provider offers."""
        ...
