"""A conversation's token total and context fill, as the status bar shows them (no Qt here).

The total is what the conversation itself paid for: the projection counts
``usage`` only after a branch's seed, so turns a branch inherited are never
counted twice. The fill is how much of the model's context window the
conversation took at its last answer (that answer's prompt plus its answer,
inherited or not: it is what the model holds), out of the context length its
server states (:meth:`~branchwise.core.providers.openai.OpenAIProvider.context_length`).
The server is asked once per server and model, on the event loop, and the
status bar is told with a ``settings`` change when the answer arrives.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from branchwise.core.conversation.views import own_usage_estimated
from branchwise.core.projection.projection import Projection
from branchwise.core.providers.base import Provider
from branchwise.desktop.host.changes import Changes

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ConversationUsage:
    """What the status bar shows for one conversation.

    Attributes:
        input_tokens: prompt tokens of its own turns.
        output_tokens: answer tokens of its own turns.
        estimated: some of its own turns were counted by the estimate.
        context_used: tokens the last answer's call held (prompt + answer), if recorded.
        context_estimated: ``context_used`` comes from an estimate.
        context_length: the model's context window, where its server states it.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False
    context_used: int | None = None
    context_estimated: bool = False
    context_length: int | None = None

    @property
    def total(self) -> int:
        """Prompt and answer tokens together."""
        return self.input_tokens + self.output_tokens

    @property
    def fill(self) -> float | None:
        """The share of the context window the last answer's call took (``None``: unknown)."""
        if self.context_used is None or not self.context_length:
            return None
        return self.context_used / self.context_length


def conversation_usage(projection: Projection, context_length: int | None) -> ConversationUsage:
    """The status bar's figures for a conversation read as ``projection``."""
    last = next(
        (
            figures
            for turn in reversed(projection.turns)
            if (figures := projection.answer_figures(turn.turn_id)) is not None
        ),
        None,
    )
    return ConversationUsage(
        input_tokens=projection.input_tokens,
        output_tokens=projection.output_tokens,
        estimated=own_usage_estimated(projection),
        context_used=last.input_tokens + last.output_tokens if last is not None else None,
        context_estimated=last.estimated if last is not None else False,
        context_length=context_length,
    )


class ContextWindows:
    """The context length each server states for each model, asked once and remembered.

    Args:
        spawn: runs a coroutine as a host task.
        emit: reports a change (the status bar re-renders on ``settings``).
    """

    def __init__(
        self,
        spawn: Callable[[Coroutine[Any, Any, None], str], asyncio.Task[None]],
        emit: Callable[[Changes], Changes],
    ) -> None:
        self._spawn = spawn
        self._emit = emit
        self._asked: set[tuple[str, str]] = set()
        self._lengths: dict[tuple[str, str], int] = {}

    def known(self, provider: Provider) -> int | None:
        """The length already known for ``provider``'s model; asks its server the first time."""
        ask = getattr(provider, "context_length", None)
        base_url = getattr(provider, "base_url", None)
        if ask is None or not isinstance(base_url, str) or not provider.model:
            return None  # the demo responder, or no model chosen yet
        key = (base_url, provider.model)
        if key not in self._asked:
            self._asked.add(key)
            self._spawn(self._ask(key, ask), f"context length of {provider.model}")
        return self._lengths.get(key)

    async def _ask(self, key: tuple[str, str], ask: Callable[[], Any]) -> None:
        length = await ask()
        if isinstance(length, int) and length > 0:
            self._lengths[key] = length
            self._emit(Changes(settings=True))
