"""Server detection, provider choice and ``branchwise models``, against real servers.

Candidate lists are always given explicitly, so whatever happens to listen on
11434 on this machine cannot change an answer.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from helpers import HELPERS_DIR
from helpers.cli import run_cli
from helpers.fake_openai_server import FakeOpenAIServer

from branchwise.core.providers.base import TextChunk
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.providers.detect import (
    DEFAULT_CANDIDATES,
    DetectedServer,
    candidate_urls,
    choose_provider,
    detect_servers,
    suggest_settings,
)
from branchwise.core.providers.openai import OpenAIProvider
from branchwise.core.settings import Settings, save_settings

T = TypeVar("T")


def run(awaitable: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(awaitable, 10)

    return asyncio.run(bounded())


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def test_detects_the_fake_server_among_dead_candidates() -> None:
    async def go() -> tuple[list[DetectedServer], str]:
        async with FakeOpenAIServer(models=["qwen", "llama"], owned_by="llamacpp") as server:
            found = await detect_servers([closed_port_url(), server.base_url], timeout=1.0)
            return found, server.base_url

    found, url = run(go())
    assert found == [DetectedServer(url, ("qwen", "llama"), "llama.cpp")]
    assert found[0].to_json() == {
        "baseUrl": url,
        "models": ["qwen", "llama"],
        "kind": "llama.cpp",
        "authRequired": False,
    }


def test_unknown_owner_is_openai_compatible_and_keys_are_not_sent() -> None:
    async def go() -> tuple[list[DetectedServer], FakeOpenAIServer]:
        async with FakeOpenAIServer(require_key="secret") as server:
            return await detect_servers([server.base_url, server.base_url + "/"]), server

    found, server = run(go())
    assert [(s.kind, s.models, s.auth_required) for s in found] == [("openai-compatible", (), True)]
    assert all("Authorization" not in r["headers"] for r in server.requests)


def test_something_that_is_not_a_model_server_is_skipped() -> None:
    async def go() -> list[DetectedServer]:
        async with FakeOpenAIServer() as server:
            return await detect_servers([server.base_url.replace("/v1", "/elsewhere")])

    assert run(go()) == []


def test_a_silent_listener_is_given_up_after_the_timeout() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()  # accepts connections into the backlog, never answers
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        assert run(detect_servers([url, closed_port_url()], timeout=0.3)) == []


def test_nothing_answering_falls_back_to_the_labelled_demo() -> None:
    found = run(detect_servers([closed_port_url(), "not a url"], timeout=0.5))
    assert found == []
    settings = Settings()
    assert suggest_settings(settings, found) is None
    provider = choose_provider(settings)
    assert isinstance(provider, DemoProvider)
    assert "demo" in provider.label.lower()


def test_configured_server_is_chosen_with_its_key_from_the_environment() -> None:
    settings = Settings(provider="openai", base_url="", model="fake-model")

    async def go() -> tuple[str, str]:
        async with FakeOpenAIServer(require_key="env-key") as server:
            configured = Settings(provider="openai", base_url=server.base_url, model="fake-model")
            provider = choose_provider(configured, environ={"BRANCHWISE_API_KEY": "env-key"})
            assert isinstance(provider, OpenAIProvider)
            text = "".join(
                [
                    item.text
                    async for item in provider.stream([{"role": "user", "content": "hi"}])
                    if isinstance(item, TextChunk)
                ]
            )
            return text, provider.label

    text, label = run(go())
    assert text == "Hello from the fake server."
    assert label.startswith("fake-model @ 127.0.0.1:")
    # "openai" with no URL is not configured: the demo answers.
    assert isinstance(choose_provider(settings), DemoProvider)


def test_first_run_suggestion_takes_the_first_server_with_models() -> None:
    empty = DetectedServer("http://127.0.0.1:11434/v1", (), "ollama")
    useful = DetectedServer("http://127.0.0.1:8080/v1", ("qwen",), "llama.cpp")
    suggestion = suggest_settings(Settings(language="en"), [empty, useful])
    assert suggestion == Settings(
        provider="openai", base_url=useful.base_url, model="qwen", language="en"
    )
    configured = Settings(provider="openai", base_url=useful.base_url)
    assert suggest_settings(configured, [useful]) is None


def test_candidates_put_the_configured_server_first_without_duplicates() -> None:
    settings = Settings(provider="openai", base_url="http://10.0.0.5:8080/v1")
    urls = candidate_urls(settings, extra=["http://127.0.0.1:11434", "bogus"])
    assert urls == ["http://10.0.0.5:8080/v1", *DEFAULT_CANDIDATES]
    assert candidate_urls(Settings()) == list(DEFAULT_CANDIDATES)


# -- the command line -------------------------------------------------------------------


@pytest.fixture(scope="module")
def server_process() -> Iterator[str]:
    """The fake server as its own process, as the runtime crash tests use it."""
    command = [
        sys.executable,
        str(HELPERS_DIR / "fake_openai_server.py"),
        *("--port", "0", "--models", "m1,m2", "--text", "streamed from another process"),
    ]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def test_cli_models_defaults_to_the_demo(tmp_path: Path) -> None:
    code, out = run_cli(tmp_path / "root", "models")
    assert code == 0
    assert out == {
        "provider": "demo",
        "baseUrl": None,
        "label": DemoProvider.label,
        "models": ["demo"],
    }


def test_cli_models_lists_the_configured_server(tmp_path: Path, server_process: str) -> None:
    root = tmp_path / "root"
    save_settings(root, Settings(provider="openai", base_url=server_process, model="m2"))
    code, out = run_cli(root, "models")
    assert code == 0
    assert out["provider"] == "openai" and out["baseUrl"] == server_process
    assert out["models"] == ["m1", "m2"] and out["label"].startswith("m2 @ 127.0.0.1:")


def test_cli_models_base_url_option_and_errors(tmp_path: Path, server_process: str) -> None:
    root = tmp_path / "root"
    code, out = run_cli(root, "models", "--base-url", server_process)
    assert (code, out["models"]) == (0, ["m1", "m2"])
    code, out = run_cli(root, "models", "--base-url", closed_port_url(), check=False)
    assert code == 1 and out["error"]["code"] == "provider_unreachable"
    code, out = run_cli(root, "models", "--base-url", "ftp://nope", check=False)
    assert code == 1 and out["error"] == {
        "code": "invalid_settings",
        "message": out["error"]["message"],
        "field": "baseUrl",
    }


def test_cli_say_runs_a_turn_against_the_server(tmp_path: Path, server_process: str) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "t")
    code, out = run_cli(
        root,
        "session",
        "say",
        created["sessionId"],
        "hello",
        "--quiet",
        "--base-url",
        server_process,
        "--model",
        "m1",
    )
    assert code == 0, out
    _, shown = run_cli(root, "session", "show", created["sessionId"])
    assert shown["messages"][-1]["content"] == "streamed from another process"
