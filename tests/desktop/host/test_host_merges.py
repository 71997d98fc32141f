"""Which branches the host says were brought back (the lineage tree's marks), headless."""

from __future__ import annotations

import asyncio
from pathlib import Path

from helpers.forking import fork_at
from helpers.sessions import complete_turn

from branchwise.core.conversation.merge import merge_back
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.host import Host


def test_only_merges_into_an_ancestor_mark_a_branch(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    with store.create("Trip plans") as writer:
        complete_turn(writer, "r1", "where to?")
        root = writer.session_id
    child = fork_at(store, root, "r1", op="op-side").child_session_id
    with store.open_writer(child) as writer:
        complete_turn(writer, "c1", "what about Kyoto?")
    merge = merge_back(store, child, None, "Kyoto", "note", "op-merge")
    with store.open_writer(root) as writer:
        complete_turn(writer, "r2", "and then?")
    # This fork of the parent inherits the merge; it is no ancestor of ``child``.
    cousin = fork_at(store, root, "r2", op="op-later").child_session_id

    async def scenario() -> None:
        host = Host(tmp_path, provider_factory=lambda _s: DemoProvider())
        seen: list[Changes] = []
        host.subscribe(seen.append)
        host.start()
        await host.search_idle()
        (mark,) = host.merges_of(child)
        assert (mark.into_session_id, mark.merge_sequence) == (root, merge.merge_sequence)
        assert host.merges_of(root) == () and host.merges_of(cousin) == ()
        assert any(child in c.sessions for c in seen)
        # Nothing new on disk: a refresh re-renders nothing.
        seen.clear()
        host.refresh_from_disk()
        await host.search_idle()
        assert not any(c.sessions for c in seen)
        await host.shutdown()

    asyncio.run(scenario())
