"""Edits on a server (and an older server that cannot take them), and branches a dead
process left unanswered."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers.gui import seed_session
from helpers.serve import serve_process, server_without_fork_titles
from helpers.sessions import visible_sessions

from branchwise.core.conversation.ask_again import edit_request, regenerate_request
from branchwise.core.errors import ServerUnsupported
from branchwise.core.fork.engine import fork
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.remote.client import RemoteStore
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.backends import RemoteForkBackend
from branchwise.desktop.host.host import Host


def test_a_server_branches_edits_with_their_prompt_and_an_older_one_refuses_them(
    tmp_path: Path,
) -> None:
    """``session-fork-origin-v1`` carries the prompt; without it a plain fork would lose it."""
    root = tmp_path / "root"
    store = SessionStore(root)
    sid = seed_session(store, ["one", "two"])
    turns = store.read(sid).projection.turns
    requests = (
        edit_request(store, sid, turns[1].turn_id, "two, edited"),  # at the end of turn 1
        regenerate_request(store, sid, turns[0].turn_id),  # at the start
    )
    before = visible_sessions(store)

    async def older() -> list[dict]:
        async with server_without_fork_titles("s_" + "0" * 26) as (url, bodies):
            backend = RemoteForkBackend(RemoteStore(url, "token"))
            for request in requests:
                with pytest.raises(ServerUnsupported) as refused:
                    await backend.fork(request, "op-remote-edit")
                assert refused.value.definitive  # the journal drops it: a retry cannot help
            return bodies

    assert asyncio.run(older()) == []  # nothing was even asked
    assert visible_sessions(store) == before
    with serve_process(root) as server:
        backend = RemoteForkBackend(RemoteStore(server.url, server.token))
        made = [asyncio.run(backend.fork(r, f"op-{n}")) for n, r in enumerate(requests)]
        again = asyncio.run(backend.fork(requests[0], "op-0"))
    assert again.child_session_id == made[0].child_session_id and not again.created
    for request, result in zip(requests, made, strict=True):
        manifest = store.manifest(result.child_session_id)
        assert manifest.parent is not None and manifest.parent.origin == request.origin


def test_a_branch_its_process_left_unanswered_is_answered_when_opened(tmp_path: Path) -> None:
    async def scenario() -> None:
        host = Host(tmp_path / "root", provider_factory=lambda _settings: DemoProvider())
        host.start()
        sid = seed_session(host.store, ["one", "two"])
        second = host.store.read(sid).projection.turns[1].turn_id
        # Another process published the branch with its prompt, then died before asking it.
        child = fork(
            host.store, edit_request(host.store, sid, second, "two?"), "op"
        ).child_session_id
        branch = host.open_session(child)
        for _ in range(500):
            if branch.rows and branch.rows[-1].end_reason is not None:
                break
            await asyncio.sleep(0.01)
        assert branch.rows[-1].prompt == "two?"
        assert branch.rows[-1].end_reason == "completed" and branch.rows[-1].answer
        await host.shutdown()

    asyncio.run(scenario())
