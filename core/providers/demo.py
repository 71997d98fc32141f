"""The built-in demo responder: a clearly labelled offline stand-in for a model.

It needs no network and answers deterministically (the same conversation
always gets the same answer), streamed in word-sized chunks with an optional
per-chunk delay, so the app and the tests can hold real conversations offline.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Mapping, Sequence

from branchwise.core.providers.base import StreamItem, TextChunk, Usage

DEMO_MODEL = "demo"

_OPENERS = (
    "Here is a thought on that.",
    "Let me take that one step at a time.",
    "Good question.",
    "That is worth branching on.",
)


def demo_answer(messages: Sequence[Mapping[str, str]]) -> str:
    """The deterministic answer to a conversation."""
    last_user = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    digest = hashlib.sha256(
        "\x1e".join(f"{m.get('role')}:{m.get('content')}" for m in messages).encode()
    ).digest()
    opener = _OPENERS[digest[0] % len(_OPENERS)]
    turns = sum(1 for m in messages if m.get("role") == "user")
    quoted = last_user.strip().replace("\n", " ")
    if len(quoted) > 120:
        quoted = quoted[:117] + "..."
    return (
        f"{opener} You said: “{quoted}”. This is turn {turns} of our conversation. "
        "I am the offline demo responder built into Branchwise, so no model server "
        "is needed: connect Ollama, llama.cpp, LM Studio or any OpenAI-compatible "
        "server in Settings for real answers."
    )


def split_chunks(text: str) -> list[str]:
    """Split text into word-sized chunks that concatenate back to it exactly."""
    chunks, start = [], 0
    for index, char in enumerate(text):
        if char == " " and index > start:
            chunks.append(text[start:index])
            start = index
    chunks.append(text[start:])
    return [c for c in chunks if c]


class DemoProvider:
    """Offline, deterministic stand-in for a model server.

    Args:
        delay: seconds to wait before each chunk (0 streams as fast as possible).
    """

    model = DEMO_MODEL
    label = "Demo responder (offline)"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    async def stream(self, messages: Sequence[Mapping[str, str]]) -> AsyncIterator[StreamItem]:
        """Stream the deterministic answer word by word, then its usage."""
        answer = demo_answer(messages)
        chunks = split_chunks(answer)
        for chunk in chunks:
            if self.delay:
                await asyncio.sleep(self.delay)
            else:
                await asyncio.sleep(0)
            yield TextChunk(chunk)
        prompt_words = sum(len(m.get("content", "").split()) for m in messages)
        yield Usage(input_tokens=prompt_words, output_tokens=len(chunks))

    async def list_models(self) -> list[str]:
        """The demo offers one model."""
        return [DEMO_MODEL]
