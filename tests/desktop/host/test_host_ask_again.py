"""Edit, regenerate and retry through the desktop host: journal, new tab, its turn runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
from helpers.fake_openai_server import FakeOpenAIServer
from helpers.gui import seed_session

from branchwise.core.fork.operations import ForkRequest
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.providers.openai import OpenAIProvider
from branchwise.core.store.manifest import BranchOrigin
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.journal import request_from_json, request_to_json


def _host(root: Path, provider: Any = None) -> tuple[Host, list[str]]:
    host = Host(root, provider_factory=lambda _settings: provider or DemoProvider())
    host.start()
    opened: list[str] = []

    async def navigate(session_id: str) -> None:
        opened.append(session_id)

    host.navigator = navigate
    return host, opened


async def _finished(host: Host, session_id: str) -> list[tuple[str, str, str | None]]:
    """The branch's transcript once its own turn has ended: (prompt, answer, end reason)."""
    session = host.session(session_id)
    assert session is not None
    await session.wait_loaded()
    for _ in range(500):
        projection = session.projection
        if projection is not None and projection.turns and not projection.turns[-1].is_open:
            break
        await asyncio.sleep(0.01)
    assert session.projection is not None
    return [
        (row.prompt, row.answer, row.end_reason) for row in session.rows if row.turn_id is not None
    ]


def test_edit_opens_a_branch_whose_edited_prompt_runs_there(tmp_path: Path) -> None:
    async def scenario() -> None:
        host, opened = _host(tmp_path)
        sid = seed_session(host.store, ["one", "two", "three"])
        source = host.open_session(sid)
        second = source.rows[1].turn_id
        assert second is not None
        child = await host.edit(sid, second, "two, but shorter")
        assert child is not None and opened == [child]
        rows = await _finished(host, child)
        assert [(prompt, reason) for prompt, _, reason in rows] == [
            ("one", "completed"),
            ("two, but shorter", "completed"),
        ]
        assert "two, but shorter" in rows[-1][1]  # the demo answers what it was asked
        # The parent is untouched and lists the branch under the edited turn.
        assert [r.prompt for r in source.rows] == ["one", "two", "three"]
        assert [m.session_id for m in host.index.branches_at(sid, second)] == [child]
        assert host.index.branches_at(sid, source.rows[0].turn_id or "") == []
        assert host.fork_coordinator.records() == ()
        await host.shutdown()

    asyncio.run(scenario())


def test_regenerate_of_the_first_turn_branches_at_the_start(tmp_path: Path) -> None:
    async def scenario() -> None:
        host, opened = _host(tmp_path)
        sid = seed_session(host.store, ["one", "two"])
        first = host.open_session(sid).rows[0].turn_id
        assert first is not None
        child = await host.regenerate(sid, first)
        assert child is not None and opened == [child]
        assert [(p, r) for p, _, r in await _finished(host, child)] == [("one", "completed")]
        parent = host.index.by_id[child].parent
        assert parent is not None and parent.turn_id is None and parent.boundary_sequence == 0
        assert parent.origin == BranchOrigin("regenerate", first, "one")
        await host.shutdown()

    asyncio.run(scenario())


def test_refusals_post_a_notice_and_make_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        host, opened = _host(tmp_path)
        sid = seed_session(host.store, ["one"])
        first = host.open_session(sid).rows[0].turn_id
        assert first is not None
        before = set(host.index.by_id)
        assert await host.edit(sid, first, "   ") is None
        assert await host.regenerate(sid, "turn_nope") is None
        assert [n.code for n in host.notices.history] == ["empty_prompt", "unknown_turn"]
        assert set(host.index.by_id) == before and opened == []
        await host.shutdown()

    asyncio.run(scenario())


def test_a_failing_server_ends_the_branch_in_error_and_retry_asks_again(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with FakeOpenAIServer(status=500) as failing:
            host, _ = _host(tmp_path, OpenAIProvider(failing.base_url, "fake-model"))
            sid = seed_session(host.store, ["one"])
            first = host.open_session(sid).rows[0].turn_id
            assert first is not None
            child = await host.edit(sid, first, "edited")
            assert child is not None
            assert [(p, r) for p, _, r in await _finished(host, child)] == [("edited", "error")]
            await host.shutdown()
        host, _ = _host(tmp_path)  # the server works again: Retry in the branch
        result = await host.retry(child)
        assert result.end_reason == "completed"
        session = host.session(child)
        assert session is not None
        assert [(r.prompt, r.end_reason) for r in session.rows] == [
            ("edited", "error"),
            ("edited", "completed"),
        ]
        projection = session.projection
        assert projection is not None
        assert [m["content"] for m in projection.model_messages()][0] == "edited"
        assert len(projection.model_messages()) == 2  # the failed turn is not sent
        await host.shutdown()

    asyncio.run(scenario())


def test_the_journal_keeps_an_edit_and_a_fork_at_the_start() -> None:
    origin = BranchOrigin("edit", "turn_2", "new words")
    for request in (
        ForkRequest("01a23f70-0159-7000-9ed8-11f35fbca8ed", None, 0, 3, origin=origin),
        ForkRequest("01a23f70-0159-7000-9ed8-11f35fbca8ed", "turn_1", 9, 3, origin=origin),
    ):
        stored = orjson.loads(orjson.dumps(request_to_json(request)))
        assert request_from_json(stored) == request
