"""Send to several across servers: the app's, another one, and the demo responder, in one fan-out.

Two real OpenAI-compatible servers on 127.0.0.1 and the host with its real
provider choice (no provider factory): each branch is asked where its target
says, only the app's server gets the app's key, and a branch goes on with the
server it was asked of.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from urllib.parse import urlsplit

from helpers.fake_openai_server import FakeOpenAIServer
from helpers.sessions import complete_turn

from branchwise.core.conversation.fanout import numbered_targets
from branchwise.core.settings import Settings, load_settings
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.fanout import FanoutRun, send_to_several
from branchwise.desktop.host.host import Host


def _chats(server: FakeOpenAIServer) -> list[dict[str, object]]:
    return [r for r in server.requests if r["path"] == "/v1/chat/completions"]


def test_one_fan_out_asks_the_apps_server_another_server_and_the_demo(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    with store.create("Trip plans") as writer:
        complete_turn(writer, "r1", "where to?")
        root = writer.session_id

    async def scenario() -> None:
        async with (
            FakeOpenAIServer(models=["alpha"], per_model=True, require_key="key-a") as app_server,
            FakeOpenAIServer(models=["beta"], per_model=True) as other,
        ):
            settings = Settings(
                provider="openai",
                base_url=app_server.base_url,
                model="alpha",
                api_key="key-a",
                demo_pace=0,
            )
            host = Host(tmp_path, settings=settings)
            host.start()
            targets = numbered_targets(
                [("alpha", None), ("beta", other.base_url), ("demo", "demo"), ("demo", "demo")]
            )
            run = FanoutRun()
            outcomes = await send_to_several(host, root, "Kyoto or Osaka?", targets, run=run)
            assert [o.end_reason for o in outcomes] == ["completed"] * 4
            alpha, beta, demo_1, demo_2 = (o.branch.session_id for o in outcomes)
            address = urlsplit(other.base_url).netloc
            assert [run.progress[o.branch.session_id].label for o in outcomes] == [
                "alpha",
                f"beta · {address}",
                "demo · sample 1",
                "demo · sample 2",
            ]
            # Each server was asked only its own model; the key went to the app's server only.
            (asked_a,) = _chats(app_server)
            assert asked_a["json"]["model"] == "alpha"  # type: ignore[index]
            (asked_b,) = _chats(other)
            assert asked_b["json"]["model"] == "beta"  # type: ignore[index]
            assert "Authorization" not in asked_b["headers"]  # type: ignore[operator]
            answers = {b: store.read(b).projection.messages[-1].content for b in (alpha, beta)}
            assert answers[alpha].startswith("[alpha]") and answers[beta].startswith("[beta]")
            demo_answers = [store.read(b).projection.messages[-1].content for b in (demo_1, demo_2)]
            assert all(demo_answers) and demo_answers[0] != demo_answers[1]
            # Each branch keeps its server: the next turn of beta's branch goes to that server.
            assert store.read(beta).projection.settings.model_server == other.base_url
            assert store.read(demo_1).projection.settings.model_server == "demo"
            assert store.read(alpha).projection.settings.model_server is None
            result = await host.send(beta, "And in winter?")
            assert result.end_reason == "completed"
            assert len(_chats(other)) == 2 and len(_chats(app_server)) == 1
            result = await host.send(demo_1, "And in winter?")
            assert result.end_reason == "completed"
            assert len(_chats(other)) == 2 and len(_chats(app_server)) == 1
            await host.shutdown()

    asyncio.run(scenario())


def test_a_server_replaced_in_settings_is_kept_among_the_saved_ones(tmp_path: Path) -> None:
    first = Settings(provider="openai", base_url="http://127.0.0.1:1234/v1", model="m")
    host = Host(tmp_path, settings=first)
    host.update_settings(Settings(provider="openai", base_url="http://127.0.0.1:11434/v1"))
    saved, _notices = load_settings(tmp_path)
    assert saved.saved_servers == ("http://127.0.0.1:1234/v1",)
    # Going back moves the other one into the saved list and leaves no repeat.
    host.update_settings(dataclasses.replace(saved, base_url="http://127.0.0.1:1234/v1"))
    again, _notices = load_settings(tmp_path)
    assert again.base_url == "http://127.0.0.1:1234/v1"
    assert again.saved_servers == ("http://127.0.0.1:11434/v1",)
