"""The built-in demo responder: a clearly labelled offline stand-in for a model.

It needs no network and answers deterministically (the same conversation
always gets the same answer), streamed in word-sized chunks with an optional
per-chunk delay, so the app and the tests can hold real conversations offline.

A newcomer's first answers come from here, so they show what real answers look
like in Branchwise: Markdown with a list, a table, a fenced code block and a
longer paragraph, varied per prompt, written in the interface language. The
prose goes through the catalogs like every other string; the code does not.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

from branchwise.core.i18n import reasons
from branchwise.core.i18n.language import N_, translator
from branchwise.core.providers.base import StreamItem, TextChunk, Usage

DEMO_MODEL = "demo"

_OPENERS = (
    N_("Here is a thought on that."),
    N_("Let me take that one step at a time."),
    N_("Good question."),
    N_("That is worth branching on."),
)

_SNIPPETS: tuple[tuple[str, str], ...] = (
    (
        "python",
        "def branch(turns: list[str], at: int) -> list[str]:\n"
        '    """Everything up to and including turn `at`."""\n'
        "    return turns[: at + 1]\n",
    ),
    (
        "javascript",
        "function branch(turns, at) {\n"
        "  // everything up to and including turn `at`\n"
        "  return turns.slice(0, at + 1);\n"
        "}\n",
    ),
    (
        "rust",
        "fn branch(turns: &[String], at: usize) -> Vec<String> {\n    turns[..=at].to_vec()\n}\n",
    ),
    (
        "sql",
        "SELECT turn_id, prompt\n  FROM turns\n WHERE session_id = ?\n   AND seq <= ?\n"
        " ORDER BY seq;\n",
    ),
    (
        "bash",
        'branchwise session targets "$ID"\nbranchwise session fork "$ID" --turn "$TURN"\n',
    ),
)


def _quoted(prompt: str) -> str:
    quoted = prompt.strip().replace("\n", " ")
    return quoted if len(quoted) <= 120 else quoted[:117] + "..."


def _list_block(turn: int, _: Callable[[str], str]) -> str:
    return "\n".join(
        (
            _("A few things you can try next:"),
            "",
            "1. " + _("Branch this turn to explore another direction."),
            "2. " + _("Edit your prompt to ask it differently."),
            "3. " + reasons.fill(_("Keep going: this is turn {n}."), {"n": turn}),
        )
    )


def _table_block(prompt: str, _: Callable[[str], str]) -> str:
    words = len(prompt.split())
    rows = (
        ("| " + _("What") + " | " + _("Value") + " |"),
        "| --- | ---: |",
        "| " + _("Characters in your message") + f" | {len(prompt)} |",
        "| " + _("Words in your message") + f" | {words} |",
    )
    return "\n".join(rows)


def _code_block(digest: bytes, _: Callable[[str], str]) -> str:
    language, code = _SNIPPETS[digest[2] % len(_SNIPPETS)]
    lead = reasons.fill(_("Here is a small example in {language}:"), {"language": language})
    return f"{lead}\n\n```{language}\n{code}```"


def _paragraph_block(_: Callable[[str], str]) -> str:
    return _(
        "Every finished turn can become a branch: a new, independent conversation "
        "that holds everything up to that turn, while this one keeps going. Nothing "
        "is overwritten; an edited prompt or another answer is a branch too, so both "
        "versions stay one click apart in the conversation tree."
    )


def demo_answer(
    messages: Sequence[Mapping[str, str]],
    language: str | None = None,
    *,
    model: str = DEMO_MODEL,
    sample: int = 0,
) -> str:
    """The deterministic answer to a conversation, in ``language`` (default: the active one).

    The same conversation in the same language always gets the same answer, so
    tests can compute what to expect. A fan-out asks the demo as several
    models, or several times: each ``model`` name and ``sample`` answers
    differently (and says which it is), still deterministically.
    """
    return _compose(messages, translator(language), model, sample)


def _compose(
    messages: Sequence[Mapping[str, str]],
    _: Callable[[str], str],
    model: str = DEMO_MODEL,
    sample: int = 0,
) -> str:
    last_user = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    asked_as = "" if (model, sample) == (DEMO_MODEL, 0) else f"\x1f{model}\x1f{sample}"
    digest = hashlib.sha256(
        ("\x1e".join(f"{m.get('role')}:{m.get('content')}" for m in messages) + asked_as).encode()
    ).digest()
    turn = sum(1 for m in messages if m.get("role") == "user")
    opener = _(_OPENERS[digest[0] % len(_OPENERS)])
    said = reasons.fill(_("You said: “{prompt}”"), {"prompt": _quoted(last_user)})
    blocks: list[Callable[[], str]] = [
        lambda: _list_block(turn, _),
        lambda: _table_block(last_user, _),
        lambda: _code_block(digest, _),
        lambda: _paragraph_block(_),
    ]
    first = digest[1] % len(blocks)
    chosen = [blocks[first], blocks[(first + 1 + digest[3] % (len(blocks) - 1)) % len(blocks)]]
    chosen.sort(key=blocks.index)
    footer = _(
        "*I am the offline demo responder built into Branchwise. Connect Ollama, "
        "llama.cpp, LM Studio or any OpenAI-compatible server in Settings for real answers.*"
    )
    # Chinese sentences end in a full-width stop and need no space after it.
    space = "" if opener.endswith(("。", "！", "？")) else " "
    head = [f"{opener}{space}{said}"]
    if asked_as:
        if sample:
            speaking = _("*Answering as **{model}**, sample {n}.*")
        else:
            speaking = _("*Answering as **{model}**.*")
        head.insert(0, reasons.fill(speaking, {"model": model, "n": sample}))
    return "\n\n".join([*head, *(block() for block in chosen), footer])


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
        language: the language to answer in; ``None`` follows the interface
            language at the moment each answer starts.
    """

    model = DEMO_MODEL
    label = "Demo responder (offline)"

    def __init__(self, delay: float = 0.0, language: str | None = None) -> None:
        self.delay = delay
        self.language = language

    sample = 0
    """Which of several answers to one question this is (a fan-out's samples; 0: the only one)."""

    def as_target(self, model: str, sample: int = 0) -> DemoProvider:
        """This responder (same pace and language) asked as ``model``, for ``sample``.

        The demo stands in for whatever model a fan-out names, so each of its
        branches gets its own deterministic answer offline.
        """
        target = copy.copy(self)
        target.model, target.sample = model or DEMO_MODEL, sample
        return target

    async def stream(self, messages: Sequence[Mapping[str, str]]) -> AsyncIterator[StreamItem]:
        """Stream the deterministic answer word by word, then its usage."""
        answer = demo_answer(messages, self.language, model=self.model, sample=self.sample)
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
