"""``session new|config|show|say``: a conversation's own model, system prompt and temperature
reach a real OpenAI-compatible server, and the command line still overrides them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from helpers import HELPERS_DIR
from helpers.cli import run_cli

from branchwise.core.settings import Settings, save_settings

FAKE_SERVER = HELPERS_DIR / "fake_openai_server.py"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    log = tmp_path / "requests.jsonl"
    with subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "--port", "0", "--record", str(log)],
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        try:
            yield proc.stdout.readline().strip(), log
        finally:
            proc.terminate()


def _chat_requests(log: Path) -> list[dict[str, object]]:
    lines = log.read_bytes().splitlines() if log.exists() else []
    return [r["json"] for r in map(orjson.loads, lines) if r["path"].endswith("/chat/completions")]


def test_a_conversation_sends_its_own_model_system_prompt_and_temperature(
    tmp_path: Path, server: tuple[str, Path]
) -> None:
    base_url, log = server
    root = tmp_path / "root"
    run_cli(root, "session", "new")  # creates the root folder
    save_settings(
        root, Settings(provider="openai", base_url=base_url, model="fake-model", temperature=0.2)
    )
    _, created = run_cli(
        root, "session", "new", "--model", "fake-model-2", "--system", "Answer in haiku."
    )
    sid = created["sessionId"]
    _, shown = run_cli(root, "session", "show", sid)
    assert shown["config"] == {
        "model": "fake-model-2",
        "system": "Answer in haiku.",
        "temperature": None,
    }

    run_cli(root, "session", "say", sid, "Hello", "--quiet")
    (first,) = _chat_requests(log)
    assert first["model"] == "fake-model-2"
    assert first["temperature"] == 0.2  # from Settings: the conversation sets none
    assert first["messages"][0] == {"role": "system", "content": "Answer in haiku."}
    assert first["messages"][1] == {"role": "user", "content": "Hello"}

    _, changed = run_cli(root, "session", "config", sid, "--temperature", "1.25", "--system", "")
    assert changed == {
        "sessionId": sid,
        "config": {"model": "fake-model-2", "system": None, "temperature": 1.25},
    }
    run_cli(root, "session", "say", sid, "Again", "--model", "fake-model", "--quiet")
    second = _chat_requests(log)[1]
    assert second["model"] == "fake-model"  # the command line wins
    assert second["temperature"] == 1.25
    assert second["messages"][0]["role"] == "user"  # no system prompt any more


def test_bad_values_are_refused_with_their_field_and_change_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    code, refused = run_cli(root, "session", "new", "--temperature", "hot", check=False)
    assert code == 1
    assert refused["error"]["code"] == "invalid_conversation_settings"
    assert refused["error"]["field"] == "temperature"
    _, listed = run_cli(root, "session", "list")
    assert listed["sessions"] == []
    _, created = run_cli(root, "session", "new")
    before = (root / "sessions" / created["sessionId"]).stat().st_mtime_ns
    code, refused = run_cli(
        root, "session", "config", created["sessionId"], "--temperature", "5", check=False
    )
    assert code == 1 and refused["error"]["field"] == "temperature"
    _, shown = run_cli(root, "session", "show", created["sessionId"])
    assert shown["config"] == {"model": None, "system": None, "temperature": None}
    assert len(shown["turns"]) == 0
    assert (root / "sessions" / created["sessionId"]).stat().st_mtime_ns == before
