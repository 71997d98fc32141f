"""The demo responder shows a newcomer what answers look like, in their language."""

from __future__ import annotations

import asyncio

import pytest

from branchwise.core.i18n.language import current_language, set_language
from branchwise.core.providers.base import TextChunk
from branchwise.core.providers.demo import DemoProvider, demo_answer

PROMPTS = [f"Question number {i} about trips" for i in range(40)]


def _convo(prompt: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt}]


def test_answers_are_deterministic_per_conversation_and_language() -> None:
    for prompt in PROMPTS[:5]:
        for language in ("en", "zh_Hans", "zh_Hant"):
            assert demo_answer(_convo(prompt), language) == demo_answer(_convo(prompt), language)
    assert demo_answer(_convo("a"), "en") != demo_answer(_convo("a"), "zh_Hans")


def test_answers_vary_between_markdown_shapes() -> None:
    answers = [demo_answer(_convo(prompt), "en") for prompt in PROMPTS]
    shapes = {
        "list": sum("\n1. " in a for a in answers),
        "table": sum("| --- | ---: |" in a for a in answers),
        "code": sum("\n```" in a for a in answers),
        "paragraph": sum("Every finished turn can become a branch" in a for a in answers),
    }
    assert all(count >= 5 for count in shapes.values()), shapes
    assert all(count < len(answers) for count in shapes.values()), shapes
    for answer in answers:
        assert answer.count("```") % 2 == 0  # every fenced block is closed
        assert "offline demo responder" in answer  # always labelled


def test_code_blocks_name_their_language() -> None:
    fenced = [a for a in (demo_answer(_convo(p), "en") for p in PROMPTS) if "```" in a]
    languages = {a.split("```", 2)[1].split("\n", 1)[0] for a in fenced}
    assert languages <= {"python", "javascript", "rust", "sql", "bash"}
    assert len(languages) >= 2


@pytest.mark.parametrize(
    ("language", "label", "not_expected"),
    [("zh_Hans", "离线演示应答器", "離線"), ("zh_Hant", "離線示範應答器", "离线")],
)
def test_answers_are_written_in_the_interface_language(
    language: str, label: str, not_expected: str
) -> None:
    previous = current_language()
    set_language(language)
    try:
        chunks = asyncio.run(_collect(DemoProvider()))
    finally:
        set_language(previous)
    answer = "".join(chunks)
    assert label in answer and not_expected not in answer
    assert "You said" not in answer
    assert current_language() == previous


def test_a_fixed_language_ignores_the_interface() -> None:
    before = current_language()
    answer = "".join(asyncio.run(_collect(DemoProvider(language="zh_Hant"))))
    assert "離線示範應答器" in answer
    assert current_language() == before


async def _collect(provider: DemoProvider) -> list[str]:
    return [
        item.text
        async for item in provider.stream(_convo("How do I plan a trip?"))
        if isinstance(item, TextChunk)
    ]
