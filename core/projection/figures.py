"""An answer's token and speed figures, and the estimate used when a server gives no counts.

A ``usage`` event (docs/storage.md, "Events") records what one model call
cost: prompt and answer tokens as the server reported them, or, when it
reported none, as :func:`estimate_tokens` counts them (``estimated``); and how
long the answer took as the turn runner measured it from the stream: time to
the first text and the time from the first text to the last. The projection
keeps these per turn, so the footer of every answer, ``session show`` and a
restart all read the same figures from the log.

The estimate is deliberately simple and deterministic, so a test, the CLI and
the window agree on it: every CJK character (Han, kana, Hangul) counts as one
token, every other run of non-space characters as one token per started four
characters, and every message adds :data:`MESSAGE_OVERHEAD` for the chat
template's framing. Real tokenizers differ by model; figures counted this way
are always shown as estimates.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MESSAGE_OVERHEAD = 4
"""Tokens a chat template adds around each message (role markers), in the estimate."""

CHARS_PER_TOKEN = 4
"""Characters of non-CJK text one estimated token stands for."""

_CJK = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31a0-\u31bf"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
)
_CJK_CHAR = re.compile(f"[{_CJK}]")
_OTHER_RUN = re.compile(f"[^\\s{_CJK}]+")


def estimate_tokens(text: str) -> int:
    """Tokens ``text`` is estimated to take (see the module docstring for the rule)."""
    cjk = len(_CJK_CHAR.findall(text))
    other = sum(-(-len(run) // CHARS_PER_TOKEN) for run in _OTHER_RUN.findall(text))
    return cjk + other


def estimate_prompt_tokens(messages: Iterable[Mapping[str, str]]) -> int:
    """Tokens a whole prompt (``{"role", "content"}`` messages) is estimated to take."""
    return sum(estimate_tokens(m.get("content", "")) + MESSAGE_OVERHEAD for m in messages)


MIN_RATE_MS = 100
"""The least generation time a speed is given for (in milliseconds)."""


@dataclass(frozen=True, slots=True)
class AnswerFigures:
    """What one turn's answer cost and how fast it came.

    Attributes:
        input_tokens: prompt tokens (the whole conversation sent, system prompt included).
        output_tokens: answer tokens.
        estimated: the counts are :func:`estimate_tokens`'s, not the server's.
        first_token_ms: milliseconds from sending the request to the first text.
        generation_ms: milliseconds from the first text to the last.
        inherited: a branch's copy of its parent's turn (the parent paid for it;
            the branch's totals leave it out).
    """

    input_tokens: int
    output_tokens: int
    estimated: bool = False
    first_token_ms: int | None = None
    generation_ms: int | None = None
    inherited: bool = False

    @property
    def tokens_per_second(self) -> float | None:
        """Answer tokens per second of generation (``None`` when no time was measured, or
        too little to say: an answer written at once, as the demo's instant pace or a
        cached reply does, took a few milliseconds and would read "71,000 tokens/s")."""
        generation = self.generation_ms or 0
        if generation < MIN_RATE_MS or self.output_tokens <= 0:
            return None
        return self.output_tokens * 1000 / generation

    def to_json(self) -> dict[str, Any]:
        """``session show``'s per-turn ``usage`` (docs/cli.md)."""
        speed = self.tokens_per_second
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "estimated": self.estimated,
            "tokensPerSecond": round(speed, 2) if speed is not None else None,
            "firstTokenMs": self.first_token_ms,
            "generationMs": self.generation_ms,
            "inherited": self.inherited,
        }


def figures_from_record(record: Mapping[str, Any], seed_length: int) -> AnswerFigures:
    """The figures of a projection's per-turn usage record (see ``Projection.turn_usage``)."""
    return AnswerFigures(
        input_tokens=int(record.get("inputTokens", 0)),
        output_tokens=int(record.get("outputTokens", 0)),
        estimated=bool(record.get("estimated", False)),
        first_token_ms=record.get("firstTokenMs"),
        generation_ms=record.get("generationMs"),
        inherited=int(record.get("seq", 0)) <= seed_length,
    )
