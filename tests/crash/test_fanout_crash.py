"""A fan-out killed (SIGKILL) while its answers stream, in a real ``session fanout`` process and
in a real ``branchwise serve``: every acknowledged text stays, each running turn closes
``interrupted``, and a retry of the operation returns exactly the same branches."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest
from helpers.cli import cli_command, run_cli
from helpers.serve import serve_process

from branchwise.core.store.manifest import Manifest
from branchwise.core.store.store import SessionStore

PROMPT = "Compare the routes"
ARGS = ("--samples", "3", "--delay-ms", "15", "--operation-id", "op-kill")


def _acknowledged(store: SessionStore, branch: str) -> str:
    """The answer text of ``branch`` committed so far ("" before any)."""
    messages = store.read(branch).projection.messages
    answer = messages[-1] if messages and messages[-1].role == "assistant" else None
    return answer.content if answer is not None else ""


def _branches(store: SessionStore, source: str) -> set[str]:
    return {
        m.session_id
        for m in store.iter_manifests()
        if isinstance(m, Manifest) and m.parent is not None and m.parent.session_id == source
    }


def _wait_for_text(store: SessionStore, branches: list[str], deadline: float) -> None:
    while time.monotonic() < deadline:
        if all(_acknowledged(store, b) for b in branches):
            return
        time.sleep(0.02)
    raise AssertionError("the branches never committed any text")


@pytest.mark.slow
def test_a_kill_while_the_answers_stream_keeps_every_acknowledged_text(tmp_path: Path) -> None:
    rng = random.Random(2828)
    rounds, ended = 5, {"interrupted": 0, "completed": 0}
    for round_ in range(rounds):
        root = tmp_path / f"root{round_}"
        _, created = run_cli(root, "session", "new", "--title", "Trip")
        source = created["sessionId"]
        run_cli(root, "session", "say", source, "Where to?", "--quiet")
        store = SessionStore(root)
        command = [*cli_command(root), "session", "fanout", source, PROMPT, *ARGS]
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            assert proc.stderr is not None
            first = orjson.loads(proc.stderr.readline())
            assert first["event"] == "branches"
            branches = [b["sessionId"] for b in first["branches"]]
            _wait_for_text(store, branches, time.monotonic() + 60)
            time.sleep(rng.random() * 0.8)
            kept = {b: _acknowledged(store, b) for b in branches}
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        code, again = run_cli(root, "session", "fanout", source, PROMPT, *ARGS, check=False)
        assert [b["sessionId"] for b in again["branches"]] == branches
        assert _branches(store, source) == set(branches)
        for entry in again["branches"]:
            text = _acknowledged(store, entry["sessionId"])
            assert text.startswith(kept[entry["sessionId"]])
            assert entry["endReason"] in ("interrupted", "completed")
            ended[entry["endReason"]] += 1
            turn = store.read(entry["sessionId"]).projection.turns[-1]
            assert turn.turn_id == entry["turnId"] and not turn.is_open
        assert code == 0
    print(f"{rounds} kills while 3 answers streamed: {ended}")
    assert ended["interrupted"] >= rounds


@pytest.mark.slow
def test_a_server_killed_while_its_fanout_streams_closes_each_turn_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "Trip")
    source = created["sessionId"]
    run_cli(root, "session", "say", source, "Where to?", "--quiet")
    store = SessionStore(root)
    with serve_process(root, args=["--delay-ms", "15"]) as served:
        env = {**os.environ, "BRANCHWISE_TOKEN": served.token}
        command = [*cli_command(root), "--server", served.url, "session", "fanout", source]
        command += [PROMPT, "--samples", "3", "--operation-id", "op-kill"]
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        ) as client:
            assert client.stderr is not None
            first = orjson.loads(client.stderr.readline())
            branches = [b["sessionId"] for b in first["branches"]]
            _wait_for_text(store, branches, time.monotonic() + 60)
            kept = {b: _acknowledged(store, b) for b in branches}
            os.kill(served.pid, signal.SIGKILL)
            out, _ = client.communicate(timeout=60)
        # The client hears the server drop mid-stream as a typed error.
        assert client.returncode == 1
        assert orjson.loads(out.splitlines()[-1])["error"]["code"] == "remote_unavailable"
        served.process.wait()
        port = int(served.url.rsplit(":", 1)[1])
    with serve_process(root, port=port) as restarted:  # its start closes the noted turns
        for branch in branches:
            turn = store.read(branch).projection.turns[-1]
            assert not turn.is_open and turn.end_reason == "interrupted"
            assert _acknowledged(store, branch).startswith(kept[branch])
        monkeypatch.setenv("BRANCHWISE_TOKEN", restarted.token)
        code, again = run_cli(
            root, "--server", restarted.url, "session", "fanout", source, PROMPT,
            "--samples", "3", "--operation-id", "op-kill", check=False,
        )  # fmt: skip
    assert [b["sessionId"] for b in again["branches"]] == branches
    assert {b["endReason"] for b in again["branches"]} == {"interrupted"}
    assert _branches(store, source) == set(branches)
