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


def test_a_conversations_own_server_answers_it_and_gets_no_key_kept_for_another(
    tmp_path: Path, server: tuple[str, Path]
) -> None:
    base_url, log = server
    root = tmp_path / "root"
    run_cli(root, "session", "new")  # creates the root folder
    # The app's server is elsewhere (nothing listens there) and has a key typed for it.
    save_settings(
        root,
        Settings(provider="openai", base_url="http://127.0.0.1:9/v1", model="m", api_key="app-key"),
    )
    _, created = run_cli(
        root, "session", "new", "--model-server", base_url + "/", "--model", "fake-model"
    )
    sid = created["sessionId"]
    assert created and run_cli(root, "session", "config", sid)[1]["config"] == {
        "model": "fake-model",
        "system": None,
        "temperature": None,
        "modelServer": base_url,
    }
    run_cli(root, "session", "say", sid, "Hello", "--quiet")
    (asked,) = _chat_requests(log)
    assert asked["model"] == "fake-model"
    recorded = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    assert all("app-key" not in str(r) for r in recorded)
    # "demo" answers offline; "" gives the conversation back to the app's server.
    _, demo = run_cli(root, "session", "config", sid, "--model-server", "demo")
    assert demo["config"]["modelServer"] == "demo"
    _, said = run_cli(root, "session", "say", sid, "Again")
    assert len(_chat_requests(log)) == 1
    _, cleared = run_cli(root, "session", "config", sid, "--model-server", "")
    assert "modelServer" not in cleared["config"]


def test_a_server_that_is_not_an_address_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new")
    sid = created["sessionId"]
    for bad in ("ftp://127.0.0.1/v1", "http://user:pw@127.0.0.1/v1", "not a url", "http://[::1"):
        code, refused = run_cli(root, "session", "config", sid, "--model-server", bad, check=False)
        assert code == 1, bad
        assert refused["error"]["code"] == "invalid_conversation_settings"
        assert refused["error"]["field"] == "modelServer"
        assert "pw" not in str(refused)
    _, shown = run_cli(root, "session", "config", sid)
    assert shown["config"] == {"model": None, "system": None, "temperature": None}
