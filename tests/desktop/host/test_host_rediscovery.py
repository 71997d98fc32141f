"""Conversations other processes create, fork and trash reach the conversation list, headless."""

from __future__ import annotations

import asyncio
from pathlib import Path

from helpers.cli import run_cli
from helpers.sessions import complete_turn

from branchwise.core.providers.demo import DemoProvider
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.host import Host


def test_the_refresh_finds_what_the_command_line_did(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    with store.create("Trip plans") as writer:
        complete_turn(writer, "r1", "where to?")
        root = writer.session_id
    with store.create("Old notes") as writer:
        old = writer.session_id

    async def scenario() -> None:
        host = Host(tmp_path, provider_factory=lambda _s: DemoProvider())
        seen: list[Changes] = []
        host.subscribe(seen.append)
        host.start()
        await host.search_idle()
        assert set(host.index.by_id) == {root, old}

        # Another process: a new conversation, a branch of the root, one trashed.
        _, created = await asyncio.to_thread(
            run_cli, tmp_path, "session", "new", "--title", "Recipes"
        )
        _, fork = await asyncio.to_thread(
            run_cli, tmp_path, "session", "fork", root, "--turn", "r1"
        )
        await asyncio.to_thread(run_cli, tmp_path, "session", "delete", old)
        new_id, branch_id = created["sessionId"], fork["childSessionId"]

        seen.clear()
        host.refresh_from_disk()
        await host.search_idle()
        assert set(host.index.by_id) == {root, new_id, branch_id}
        assert host.index.by_id[new_id].title == "Recipes"
        assert [m.session_id for m in host.index.children(root)] == [branch_id]
        assert any(c.added == {new_id, branch_id} for c in seen)
        assert any(c.sidebar for c in seen)  # the trashed one leaves the list

        # Nothing changed since: the next refresh announces nothing for the list.
        seen.clear()
        host.refresh_from_disk()
        await host.search_idle()
        assert not any(c.added or c.sidebar for c in seen)
        await host.shutdown()

    asyncio.run(scenario())
