"""Edits the desktop cannot make remotely, and branches a dead process left unanswered."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers.gui import seed_session
from helpers.serve import serve_process
from helpers.sessions import visible_sessions

from branchwise.core.conversation.ask_again import edit_request, regenerate_request
from branchwise.core.errors import ServerUnsupported
from branchwise.core.fork.engine import fork
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.remote.client import RemoteStore
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.backends import RemoteForkBackend
from branchwise.desktop.host.host import Host


def test_a_remote_fork_server_refuses_edits_and_makes_nothing(tmp_path: Path) -> None:
    """``POST /fork-session`` has no field for a prompt: a plain fork would lose it."""
    root = tmp_path / "root"
    store = SessionStore(root)
    sid = seed_session(store, ["one", "two"])
    second = store.read(sid).projection.turns[1].turn_id
    before = visible_sessions(store)
    with serve_process(root) as server:
        backend = RemoteForkBackend(RemoteStore(server.url, server.token))
        for request in (
            edit_request(store, sid, second, "two, edited"),  # at the end of turn 1
            regenerate_request(store, sid, store.read(sid).projection.turns[0].turn_id),  # start
        ):
            with pytest.raises(ServerUnsupported) as refused:
                asyncio.run(backend.fork(request, "op-remote-edit"))
            assert refused.value.definitive  # the journal drops it: a retry cannot help
    assert visible_sessions(store) == before


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
