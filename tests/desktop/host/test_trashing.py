"""The desktop's Trash without widgets: a running turn stops first, Undo, purge, empty."""

from __future__ import annotations

import asyncio
from pathlib import Path

from helpers.gui import seed_session
from helpers.sessions import log_scan

from branchwise.core.projection.projection import Projection
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.store.trash import Trash
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.trashing import RESTORE_ACTION, Trashing


def _host(root: Path, delay: float = 0.0) -> Host:
    host = Host(root, provider_factory=lambda _settings: DemoProvider(delay=delay))
    host.start()
    return host


def test_deleting_a_running_conversation_stops_its_turn_as_cancelled_then_undo(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        host = _host(tmp_path, delay=0.05)
        trashing = Trashing(host)
        session = host.create_session("Long answer")
        sid = session.session_id
        turn = asyncio.ensure_future(host.send(sid, "tell me a long story"))
        while not host.is_running(sid):
            await asyncio.sleep(0.01)

        assert await trashing.delete(sid)

        assert (await turn).end_reason == "cancelled"
        assert host.session(sid) is None and sid not in host.index.by_id
        frames = log_scan(Trash(host.store).session_dir(sid)).frames
        projection = Projection.replay(frame.events for frame in frames)
        assert projection.turns[-1].end_reason == "cancelled"
        notice = host.notices.history[-1]
        assert notice.code == "conversation_trashed" and notice.params["title"] == "Long answer"
        assert notice.action is not None and notice.action.kind == RESTORE_ACTION
        assert [e.session_id for e in trashing.entries()] == [sid]

        assert await trashing.restore(notice.action.session_id)
        assert sid in host.index.by_id and trashing.entries() == []
        assert host.notices.history[-1].code == "conversation_restored"
        await host.shutdown()

    asyncio.run(scenario())


def test_branches_surface_purge_and_empty_and_refusals_are_notices(tmp_path: Path) -> None:
    async def scenario() -> None:
        host = _host(tmp_path)
        trashing = Trashing(host)
        a = seed_session(host.store, ["one"], title="A")
        b = seed_session(host.store, ["two"], title="B")
        host.start()
        assert await trashing.delete(a) and await trashing.delete(b)
        assert not await trashing.delete(a)
        assert host.notices.history[-1].code == "session_trashed"

        assert await trashing.purge(a)
        assert host.notices.history[-1].code == "conversation_purged"
        assert host.notices.history[-1].params["title"] == "A"
        assert await trashing.empty() == [b]
        assert trashing.entries() == [] and host.index.by_id == {}
        assert not await trashing.restore(b)
        assert host.notices.history[-1].code == "session_not_found"
        await host.shutdown()

    asyncio.run(scenario())
