"""The host's operations a widget asks for: export, compare, and the model servers' questions.

Real files, a real store and a real OpenAI-compatible HTTP server on 127.0.0.1;
the answers are what the widgets show.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import orjson
import pytest
from helpers.fake_openai_server import FakeOpenAIServer
from helpers.forking import fork_at
from helpers.sessions import complete_turn

from branchwise.core.settings import Settings
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.conversation import ConversationRef
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.operations import ModelList


def _closed_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


def _tree(store: SessionStore) -> tuple[str, str]:
    with store.create("Trip plans") as writer:
        complete_turn(writer, "r1", "where to?")
        complete_turn(writer, "r2", "when?")
        root = writer.session_id
    child = fork_at(store, root, "r1", op="op-child").child_session_id
    return root, child


def test_export_writes_the_file_and_reports_with_its_initiator(tmp_path: Path) -> None:
    host = Host(tmp_path / "root")
    root, _child = _tree(host.store)
    asker = object()

    async def scenario() -> None:
        for name in ("trip.md", "trip.json"):
            changes = await host.operations.export(root, tmp_path / name, initiator=asker)
            assert changes.initiator is asker and changes.empty  # nothing the app shows changed
        missing = tmp_path / "no such folder" / "trip.md"
        await host.operations.export(root, missing, initiator=asker)
        assert not missing.exists()

    asyncio.run(scenario())
    assert (tmp_path / "trip.md").read_text().startswith("# Trip plans\n")
    document = orjson.loads((tmp_path / "trip.json").read_bytes())
    assert document["messages"][0]["content"] == "where to?"
    codes = [notice.code for notice in host.notices.history]
    assert codes[:2] == ["conversation_exported", "conversation_exported"]
    assert len(codes) == 3 and codes[2] != "conversation_exported"


def test_compare_reads_both_logs_and_a_refusal_is_a_notice(tmp_path: Path) -> None:
    host = Host(tmp_path / "root")
    root, child = _tree(host.store)
    with host.store.create("Elsewhere") as writer:
        complete_turn(writer, "e1", "unrelated")
        other = writer.session_id

    async def scenario() -> None:
        compared = await host.operations.compare([ConversationRef(root), ConversationRef(child)], 2)
        assert compared is not None
        assert (compared.common_title, compared.shared_turns) == ("Trip plans", 1)
        assert [row.numbers for row in compared.rows] == [(2, None)]  # root's own turn 2
        assert compared.at_turn == 2
        assert (
            await host.operations.compare([ConversationRef(root), ConversationRef(other)]) is None
        )
        remote = ConversationRef(root, server="http://127.0.0.1:1")
        assert await host.operations.compare([ConversationRef(child), remote]) is None
        with pytest.raises(ValueError):
            await host.operations.compare([ConversationRef(root), ConversationRef(root)])

    asyncio.run(scenario())
    assert [notice.code for notice in host.notices.history] == ["not_related", "server_cannot"]


def test_the_model_list_and_detection_ask_real_servers(tmp_path: Path) -> None:
    host = Host(tmp_path / "root")

    async def scenario() -> None:
        listing = await FakeOpenAIServer(models=["llama3.2", "qwen2.5"]).start()
        unlisted = await FakeOpenAIServer(list_models=False).start()
        try:
            draft = Settings(provider="openai", base_url=listing.base_url)
            answer = await host.operations.list_models(draft)
            assert answer == ModelList(models=("llama3.2", "qwen2.5"))
            quiet = Settings(provider="openai", base_url=unlisted.base_url)
            answer = await host.operations.list_models(quiet)
            assert answer.unlisted == "provider_model_list_unavailable" and not answer.models
            gone = Settings(provider="openai", base_url=_closed_url())
            answer = await host.operations.list_models(gone)
            assert answer.failure is not None and not answer.models
            found = await host.operations.detect_servers(draft, [_closed_url(), listing.base_url])
            assert [(s.base_url, s.models) for s in found] == [
                (listing.base_url, ("llama3.2", "qwen2.5"))
            ]
        finally:
            await listing.stop()
            await unlisted.stop()

    asyncio.run(scenario())
