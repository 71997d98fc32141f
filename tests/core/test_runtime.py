"""The turn runner with the offline demo responder, in-process and as a killed process."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import orjson
from helpers.cli import cli_command, wait_for_partial_text
from helpers.recording import Recorder

from branchwise.core.projection.figures import estimate_prompt_tokens, estimate_tokens
from branchwise.core.providers.demo import DemoProvider, demo_answer, split_chunks
from branchwise.core.runtime import TurnResult, TurnRunner
from branchwise.core.store.store import SessionStore


def test_a_whole_turn_is_streamed_and_committed(store: SessionStore) -> None:
    recorder = Recorder()
    with store.create("") as writer:
        result = asyncio.run(TurnRunner(writer, DemoProvider(), recorder).run("Hello there"))
    answer = demo_answer([{"role": "user", "content": "Hello there"}])
    assert "".join(recorder.chunks) == answer == result.text
    assert recorder.chunks == split_chunks(answer)
    assert result.end_reason == "completed" and recorder.result == result
    closing = [e["type"] for e in recorder.commits[-1]]
    assert closing == ["message/assistant", "step/end", "usage", "turn/end"]
    assert result.boundary_sequence == recorder.commits[-1][-1]["seq"]
    snapshot = store.read(result.session_id)
    assert snapshot.manifest.title == "Hello there"
    turn = snapshot.projection.turns[0]
    assert (turn.turn_id, turn.message_id, turn.boundary_sequence) == (
        result.turn_id,
        result.message_id,
        result.boundary_sequence,
    )
    # The demo counts words, not tokens: its figures are the documented estimate.
    figures = snapshot.projection.answer_figures(result.turn_id)
    assert figures is not None and figures.estimated
    assert snapshot.projection.output_tokens == figures.output_tokens == estimate_tokens(answer)
    assert figures.input_tokens == estimate_prompt_tokens(
        [{"role": "user", "content": "Hello there"}]
    )


def test_the_model_sees_the_whole_conversation(store: SessionStore) -> None:
    with store.create("ctx") as writer:
        asyncio.run(TurnRunner(writer, DemoProvider()).run("first"))
        second = asyncio.run(TurnRunner(writer, DemoProvider()).run("second"))
        context = writer.projection.model_messages()[:-1]
    assert second.text == demo_answer(context)
    assert "turn 2" in second.text


def test_partial_text_is_committed_while_streaming(store: SessionStore) -> None:
    recorder = Recorder()
    with store.create("slow") as writer:
        runner = TurnRunner(writer, DemoProvider(delay=0.01), recorder, flush_interval=0.05)
        asyncio.run(runner.run("stream please"))
    deltas = [c[0] for c in recorder.commits if c[0]["type"] == "message/delta"]
    assert len(deltas) >= 2 and all(len(c) == 1 for c in recorder.commits[1:-1])
    # The first names the message; the next ones continue it with nothing but their text.
    assert deltas[0]["messageId"] == runner.message_id and deltas[0]["model"] == "demo"
    assert all(set(d) == {"seq", "type", "delta"} for d in deltas[1:])
    assert all(d["delta"] for d in deltas)
    # Each partial commit stored only what was new; together they are a prefix of the answer.
    final = recorder.commits[-1][0]
    assert final["type"] == "message/assistant" and final["content"] == runner.text
    assert runner.text.startswith("".join(d["delta"] for d in deltas))


def test_cancel_keeps_the_partial_text(store: SessionStore) -> None:
    recorder = Recorder()

    async def run_and_cancel(writer: Any) -> TurnResult:
        runner = TurnRunner(writer, DemoProvider(delay=0.01), recorder)
        task = asyncio.ensure_future(runner.run("cancel me"))
        while len(recorder.chunks) < 5:
            await asyncio.sleep(0.005)
        runner.cancel()
        return await task

    with store.create("cancel") as writer:
        result = asyncio.run(run_and_cancel(writer))
    assert result.end_reason == "cancelled"
    assert result.text == "".join(recorder.chunks) and result.text
    message = store.read(result.session_id).projection.message(result.message_id or "")
    assert message is not None and message.content == result.text and not message.partial


def test_killed_runner_process_leaves_an_interrupted_turn_with_its_partial_text(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    store = SessionStore(root)
    with store.create("killed") as writer:
        session_id = writer.session_id
    cli = cli_command(root)
    with subprocess.Popen(
        [*cli, "session", "say", session_id, "tell me a long story", "--delay-ms", "40"],
        stdout=subprocess.PIPE,
    ) as proc:
        partial = wait_for_partial_text(store, session_id)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    reopened = store.open_writer(session_id)
    turn = reopened.projection.turns[0]
    kept = reopened.projection.message(partial.message_id)
    reopened.close()
    assert turn.end_reason == "interrupted"
    assert kept is not None and kept.content.startswith(partial.content)
    shown = subprocess.run([*cli, "session", "show", session_id], capture_output=True, check=True)
    body = orjson.loads(shown.stdout)
    assert body["turns"][0]["endReason"] == "interrupted"
    assert body["messages"][1]["content"] == kept.content
