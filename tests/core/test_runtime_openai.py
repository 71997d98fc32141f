"""Turns run against a real OpenAI-compatible server on 127.0.0.1 (the fake server)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import HELPERS_DIR
from helpers.cli import cli_command, wait_for_partial_text
from helpers.fake_openai_server import FakeOpenAIServer
from helpers.recording import Recorder

from branchwise.core.providers.openai import OpenAIProvider
from branchwise.core.runtime import TurnResult, TurnRunner
from branchwise.core.store.store import SessionStore

FAKE_SERVER = HELPERS_DIR / "fake_openai_server.py"


def _run(
    store: SessionStore,
    text: str = "hi",
    read_timeout: float = 5.0,
    recorder: Recorder | None = None,
    **knobs: Any,
) -> tuple[TurnResult, SessionStore]:
    async def go() -> TurnResult:
        async with FakeOpenAIServer(**knobs) as server:
            provider = OpenAIProvider(server.base_url, "fake-model", read_timeout=read_timeout)
            with store.create("openai") as writer:
                return await TurnRunner(writer, provider, recorder).run(text)

    return asyncio.run(go()), store


def test_streamed_chunks_arrive_in_order_and_are_committed(store: SessionStore) -> None:
    chunks = [f" w{n}" for n in range(50)]
    recorder = Recorder()
    result, _ = _run(store, recorder=recorder, chunks=chunks, usage=(11, 50))
    assert recorder.chunks == chunks
    assert result.end_reason == "completed" and result.text == "".join(chunks)
    projection = store.read(result.session_id).projection
    assert projection.message(result.message_id or "").content == "".join(chunks)  # type: ignore[union-attr]
    assert (projection.input_tokens, projection.output_tokens) == (11, 50)
    assert projection.message(result.message_id or "").model == "fake-model"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("knobs", "code", "words"),
    [
        (
            {"status": 500, "error_message": "CUDA out of memory"},
            "provider_http_error",
            "CUDA out of memory",
        ),
        ({"status": 401}, "provider_auth", "key"),
        ({"stall_after": 2, "stall": 10.0}, "provider_timeout", "read timeout"),
        ({"cut_after": 3}, "provider_stream_cut", ""),
        ({"garbage_after": 2}, "provider_bad_stream", ""),
    ],
)
def test_failures_end_the_turn_with_error_and_readable_text(
    store: SessionStore, knobs: dict[str, Any], code: str, words: str
) -> None:
    result, _ = _run(store, read_timeout=0.5, **knobs)
    assert result.end_reason == "error"
    assert result.error is not None and result.error.code == code
    assert words.lower() in result.error.message.lower()
    turn = store.read(result.session_id).projection.turns[0]
    assert turn.end_reason == "error" and turn.error == result.error.message
    if knobs.get("cut_after") or knobs.get("stall_after") or knobs.get("garbage_after"):
        kept = store.read(result.session_id).projection.message(result.message_id or "")
        assert kept is not None and kept.content == result.text != ""


def test_cancel_during_streaming_keeps_partial_text(store: SessionStore) -> None:
    recorder = Recorder()

    async def go() -> TurnResult:
        async with FakeOpenAIServer(chunks=[f" c{n}" for n in range(200)], delay=0.01) as server:
            provider = OpenAIProvider(server.base_url, "fake-model")
            with store.create("cancel") as writer:
                runner = TurnRunner(writer, provider, recorder)
                task = asyncio.ensure_future(runner.run("go"))
                while len(recorder.chunks) < 10:
                    await asyncio.sleep(0.01)
                runner.cancel()
                return await task

    result = asyncio.run(go())
    assert result.end_reason == "cancelled"
    assert result.text.startswith(" c0 c1") and len(recorder.chunks) < 200
    message = store.read(result.session_id).projection.message(result.message_id or "")
    assert message is not None and message.content == result.text


def test_runner_process_killed_mid_stream_reopens_as_interrupted(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = SessionStore(root)
    with store.create("killed") as writer:
        session_id = writer.session_id
    with subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "--port", "0", "--chunks", "400", "--delay", "0.02"],
        stdout=subprocess.PIPE,
        text=True,
    ) as server:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        with subprocess.Popen(
            [
                *cli_command(root),
                "session",
                "say",
                session_id,
                "story",
                "--base-url",
                base_url,
                "--model",
                "fake-model",
                "--quiet",
            ],
        ) as runner:
            partial = wait_for_partial_text(store, session_id)
            os.kill(runner.pid, signal.SIGKILL)
            runner.wait()
        server.send_signal(signal.SIGTERM)
        server.wait()
    reopened = store.open_writer(session_id)
    turn = reopened.projection.turns[0]
    kept = reopened.projection.message(partial.message_id)
    reopened.close()
    assert turn.end_reason == "interrupted"
    assert kept is not None and kept.content.startswith(partial.content) and " w" in kept.content
