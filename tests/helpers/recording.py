"""A turn listener that records what a UI would see."""

from __future__ import annotations

from typing import Any

from branchwise.core.runtime import TurnListener, TurnResult


class Recorder(TurnListener):
    """Collects what a UI would see."""

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.commits: list[list[dict[str, Any]]] = []
        self.started: tuple[str, str, str] | None = None
        self.result: TurnResult | None = None

    def turn_started(self, turn_id: str, user_message_id: str, message_id: str) -> None:
        self.started = (turn_id, user_message_id, message_id)

    def text_received(self, turn_id: str, message_id: str, chunk: str) -> None:
        self.chunks.append(chunk)

    def committed(self, events: list[dict[str, Any]]) -> None:
        self.commits.append(events)

    def turn_ended(self, result: TurnResult) -> None:
        self.result = result
