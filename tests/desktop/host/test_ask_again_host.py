"""Edit, regenerate and retry through the real Host (no widgets): journal, branch, answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers.gui import seed_session

from branchwise.core.ask_again import ask_again_request
from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.projection import events as ev
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.store.manifest import BranchOrigin
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.journal import (
    InvalidRecord,
    read_journal_document,
    request_from_json,
    request_to_json,
)


def _host(root: Path) -> Host:
    host = Host(root, provider_factory=lambda _settings: DemoProvider())
    host.start()
    return host


def test_an_edit_goes_through_the_journal_opens_the_branch_and_answers_there(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        host = _host(tmp_path)
        opened: list[str] = []
        journal_seen: list[object] = []

        async def navigate(session_id: str) -> None:
            journal_seen.append(read_journal_document(host.root))
            opened.append(session_id)

        host.navigator = navigate
        sid = seed_session(host.store, ["one", "two"], title="Plans")
        session = host.open_session(sid)
        second = session.rows[1].turn_id
        assert second is not None
        child = await host.request_ask_again(sid, second, "edit", "two, but better")
        assert child is not None and opened == [child]
        branch = host.session(child)
        assert branch is not None
        await asyncio.wait_for(_until(lambda: not branch.running and len(branch.rows) == 2), 10)
        assert [e.content for e in branch.rows[1].entries][0] == "two, but better"
        assert branch.rows[1].end_reason == "completed"
        # Listed under turn 2 (the turn it asks again), not under turn 1 where it forks.
        assert [m.session_id for m in host.index.branches_at(sid, second)] == [child]
        assert host.index.branches_at(sid, session.rows[0].turn_id or "") == []
        assert host.store.manifest(child).title == "Plans (branch 1)"
        # Journalled while the tab opened, acknowledged after.
        (document,) = journal_seen
        assert "two, but better" in str(document)
        assert "two, but better" not in str(read_journal_document(host.root))
        await host.shutdown()

    asyncio.run(scenario())


def test_regenerate_the_first_turn_and_retry_a_failed_one(tmp_path: Path) -> None:
    async def scenario() -> None:
        host = _host(tmp_path)
        host.navigator = None
        sid = seed_session(host.store, ["one"])
        with host.store.open_writer(sid) as writer:
            writer.commit([ev.turn_start("bad"), ev.user_message("u-bad", "failed question")])
            writer.commit([ev.turn_end("bad", "error", "server down")])
        session = host.open_session(sid)
        first = session.rows[0].turn_id
        assert first is not None
        child = await host.request_ask_again(sid, first, "regenerate")
        assert child is not None
        assert host.store.manifest(child).seed_length == 0
        result = await host.retry(sid, "bad")
        assert result is not None and result.end_reason == "completed"
        assert [r.entries[0].content for r in session.rows] == [
            "one",
            "failed question",
            "failed question",
        ]
        # A turn that did not fail is refused with a notice, nothing run.
        assert await host.retry(sid, first) is None
        assert host.notices.history[-1].code == "turn_not_failed"
        assert await host.request_ask_again(sid, first, "edit", "  ") is None
        assert host.notices.history[-1].code == "empty_prompt"
        await host.shutdown()

    asyncio.run(scenario())


async def _until(condition: object) -> None:
    assert callable(condition)
    while not condition():
        await asyncio.sleep(0.01)


def test_the_journal_keeps_an_edit_request_whole(tmp_path: Path) -> None:
    start = ForkRequest(
        "0000000000-source", None, 0, 3, origin=BranchOrigin("edit", "t1", "new words")
    )
    middle = ForkRequest(
        "0000000000-source", "t1", 9, 3, origin=BranchOrigin("regenerate", "t2", "q")
    )
    for request in (start, middle, ForkRequest("0000000000-source", "t1", 9, 3)):
        assert request_from_json(request_to_json(request)) == request
    plain = request_to_json(ForkRequest("0000000000-source", "t1", 9, 3))
    assert "origin" not in plain  # records of plain branches keep their shape and hash
    bad = [
        {**request_to_json(start), "boundarySequence": 4},  # at the start is boundary 0
        {**request_to_json(middle), "origin": {"kind": "rewrite", "turnId": "t", "prompt": ""}},
        {**request_to_json(middle), "turnId": None},
    ]
    for data in bad:
        with pytest.raises(InvalidRecord):
            request_from_json(data)


def test_a_branch_left_unanswered_by_a_dead_process_is_answered_when_opened(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        host = _host(tmp_path)
        sid = seed_session(host.store, ["one", "two"])
        source = host.store.read(sid).projection
        request = ask_again_request(source, sid, 1, source.turns[1].turn_id, "edit", "two?")
        child = fork(host.store, request, "op-dead").child_session_id  # then the process died
        branch = host.open_session(child)
        await asyncio.wait_for(
            _until(lambda: bool(branch.rows) and branch.rows[-1].end_reason == "completed"), 10
        )
        assert branch.rows[-1].entries[0].content == "two?"
        assert branch.rows[-1].entries[1].content  # answered here
        await host.shutdown()

    asyncio.run(scenario())
