"""Each answer's token and speed figures: the server's usage or an estimate, kept in the log.

Turns run against a real OpenAI-compatible server on 127.0.0.1 streaming with
and without ``usage``; the figures are read back by ``session show`` in
another process, as they survive a restart. A branch shows the figures of the
turns it inherited but counts only its own.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import run_cli
from helpers.fake_openai_server import FakeOpenAIServer
from helpers.forking import fork_at
from helpers.sessions import complete_turn

from branchwise.core.projection.figures import (
    MESSAGE_OVERHEAD,
    MIN_RATE_MS,
    AnswerFigures,
    estimate_prompt_tokens,
    estimate_tokens,
)
from branchwise.core.providers.openai import OpenAIProvider
from branchwise.core.runtime import TurnResult, TurnRunner
from branchwise.core.store.store import SessionStore

CHUNKS = [" one", " two", " three", " four"]


def _ticks() -> Any:
    """A clock that moves 10 ms a reading: the runner's timings become counts of readings."""
    steps = itertools.count()
    return lambda: next(steps) * 0.01


def _say(store: SessionStore, session_id: str | None, text: str, **knobs: Any) -> TurnResult:
    async def go() -> TurnResult:
        async with FakeOpenAIServer(chunks=CHUNKS, **knobs) as server:
            provider = OpenAIProvider(server.base_url, "fake-model")
            if session_id is None:
                writer = store.create("figures")
            else:
                writer = store.open_writer(session_id)
            with writer:
                return await TurnRunner(writer, provider, clock=_ticks()).run(text)

    return asyncio.run(go())


def _shown(store: SessionStore, session_id: str) -> dict[str, Any]:
    return run_cli(store.root, "session", "show", session_id)[1]


def test_the_servers_usage_and_the_measured_speed_are_kept_per_turn(store: SessionStore) -> None:
    result = _say(store, None, "count to four", usage=(11, 50))
    shown = _shown(store, result.session_id)
    usage = shown["turns"][0]["usage"]
    assert (usage["inputTokens"], usage["outputTokens"], usage["estimated"]) == (11, 50, False)
    # One clock reading between asking and the first text: 10 ms to the first token.
    assert usage["firstTokenMs"] == 10
    assert usage["generationMs"] > 0
    # 40 ms of generation is too little to give a speed for ("1,250 tokens/s" says nothing).
    assert usage["generationMs"] < MIN_RATE_MS and usage["tokensPerSecond"] is None
    assert usage["inherited"] is False
    assert shown["usage"] == {"inputTokens": 11, "outputTokens": 50, "estimated": False}


def test_a_stream_without_usage_is_counted_and_marked_estimated(store: SessionStore) -> None:
    result = _say(store, None, "count to four", usage=None)
    answer = "".join(CHUNKS)
    assert result.text == answer
    usage = _shown(store, result.session_id)["turns"][0]["usage"]
    assert usage["estimated"] is True
    assert usage["outputTokens"] == estimate_tokens(answer) == 5  # "three" is two
    assert usage["inputTokens"] == estimate_prompt_tokens(
        [{"role": "user", "content": "count to four"}]
    )
    assert usage["firstTokenMs"] == 10
    shown = _shown(store, result.session_id)
    assert shown["usage"]["estimated"] is True


def test_a_branch_shows_inherited_figures_but_counts_only_its_own(store: SessionStore) -> None:
    first = _say(store, None, "first", usage=(10, 20))
    _say(store, first.session_id, "second", usage=(30, 40))
    child = fork_at(store, first.session_id, first.turn_id).child_session_id
    before = _shown(store, child)
    assert before["turns"][0]["usage"]["inherited"] is True
    assert before["turns"][0]["usage"]["outputTokens"] == 20  # the answer's figures still show
    assert before["usage"] == {"inputTokens": 0, "outputTokens": 0, "estimated": False}
    _say(store, child, "in the branch", usage=(50, 7))
    after = _shown(store, child)
    assert [t["usage"]["inherited"] for t in after["turns"]] == [True, False]
    assert after["usage"] == {"inputTokens": 50, "outputTokens": 7, "estimated": False}
    parent = _shown(store, first.session_id)
    assert parent["usage"] == {"inputTokens": 40, "outputTokens": 60, "estimated": False}


def test_logs_written_before_the_figures_read_as_before(store: SessionStore) -> None:
    with store.create("old") as writer:
        complete_turn(writer, "t1", "hello", tokens=3)
        session_id = writer.session_id
    usage = _shown(store, session_id)["turns"][0]["usage"]
    assert usage == {
        "inputTokens": 3,
        "outputTokens": 6,
        "estimated": False,
        "tokensPerSecond": None,
        "firstTokenMs": None,
        "generationMs": None,
        "inherited": False,
    }


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("a", 1),
        ("hello world", 4),
        ("你好世界", 4),
        ("你好 world!", 4),
        ("分支 branch", 4),
    ],
)
def test_the_estimate_counts_cjk_per_character(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


def test_the_prompt_estimate_adds_each_messages_framing() -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "你好"}]
    assert estimate_prompt_tokens(messages) == 3 + 2 + 2 * MESSAGE_OVERHEAD  # "brief" is two


@pytest.mark.parametrize("kind", ["lmstudio", "ollama", "llamacpp"])
def test_the_context_length_is_read_where_the_server_states_it(kind: str) -> None:
    async def go() -> tuple[int | None, int | None]:
        async with FakeOpenAIServer(kind=kind, context_length=8192) as server:
            stated = await OpenAIProvider(server.base_url, "fake-model").context_length()
            server.configure(context_length=None)
            silent = await OpenAIProvider(server.base_url, "fake-model").context_length()
            return stated, silent

    assert asyncio.run(go()) == (8192, None)


def test_an_unreachable_server_states_no_context_length(tmp_path: Path) -> None:
    provider = OpenAIProvider("http://127.0.0.1:9/v1", "m", connect_timeout=0.5)
    assert asyncio.run(provider.context_length()) is None


def test_a_speed_is_given_only_for_a_tenth_of_a_second_of_generation_or_more() -> None:
    assert AnswerFigures(10, 142, generation_ms=2).tokens_per_second is None
    assert AnswerFigures(10, 142, generation_ms=None).tokens_per_second is None
    assert AnswerFigures(10, 50, generation_ms=MIN_RATE_MS).tokens_per_second == 500.0
    assert AnswerFigures(10, 345, generation_ms=8_373).tokens_per_second == pytest.approx(
        41.2, 0.01
    )
