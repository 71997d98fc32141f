"""The desktop host without any widget: plain asyncio, real files, the demo responder."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers.gui import seed_session
from helpers.sessions import commits_of

from branchwise.core.providers.demo import DemoProvider
from branchwise.core.store.store import SessionStore, SessionWriter
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.session import SessionMode


def _host(root: Path, delay: float = 0.0) -> Host:
    host = Host(root, provider_factory=lambda _settings: DemoProvider(delay=delay))
    host.start()
    return host


def test_a_turn_reports_its_changes_and_refreshes_targets(tmp_path: Path) -> None:
    async def scenario() -> None:
        host = _host(tmp_path)
        seen: list[Changes] = []
        chunks: list[str] = []
        host.subscribe(seen.append)
        host.subscribe_text(lambda sid, turn, msg, chunk: chunks.append(chunk))
        session = host.create_session()
        assert session.mode is SessionMode.WRITABLE
        result = await host.send(session.session_id, "hello host")
        assert result.end_reason == "completed"
        assert "".join(chunks) == result.text
        assert any(c.turns == frozenset({(session.session_id, result.turn_id)}) for c in seen)
        assert any(session.session_id in c.targets for c in seen)
        row = session.row(result.turn_id)
        assert row is not None and row.key == result.message_id
        state = host.branch_state(session.session_id, row)
        assert state.enabled and state.target is not None
        assert state.target.boundary_sequence == result.boundary_sequence
        assert host.index.by_id[session.session_id].title == "hello host"
        await host.shutdown()

    asyncio.run(scenario())


def test_branching_headless_creates_and_opens_the_child(tmp_path: Path) -> None:
    async def scenario() -> None:
        host = _host(tmp_path)
        opened: list[str] = []

        async def navigate(session_id: str) -> None:
            opened.append(session_id)

        host.navigator = navigate
        sid = seed_session(host.store, ["one", "two"])
        session = host.open_session(sid)
        first = session.rows[0]
        target = host.branch_state(sid, first).target
        assert target is not None
        child = await host.request_branch(target)
        assert child is not None and opened == [child]
        assert host.index.by_id[child].parent is not None
        assert [m.session_id for m in host.index.branches_at(sid, first.turn_id or "")] == [child]
        child_session = host.session(child)
        assert child_session is not None
        assert [r.turn_id for r in child_session.rows] == [first.turn_id]
        assert [n.code for n in host.notices.history] == ["fork_created"]
        await host.shutdown()

    asyncio.run(scenario())


def test_a_branch_is_published_titled_and_the_click_opens_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writers: list[str] = []
    open_writer = SessionStore.open_writer

    def counting_open_writer(
        store: SessionStore, session_id: str, *, continue_turn: str | None = None
    ) -> SessionWriter:
        writers.append(session_id)
        return open_writer(store, session_id, continue_turn=continue_turn)

    monkeypatch.setattr(SessionStore, "open_writer", counting_open_writer)

    async def scenario() -> None:
        host = _host(tmp_path)
        published: list[str] = []

        async def navigate(session_id: str) -> None:
            # The tab opens on a child whose files already carry its own title.
            published.append(host.store.manifest(session_id).title)

        host.navigator = navigate
        sid = seed_session(host.store, ["one", "two"], title="Planning")
        session = host.open_session(sid)
        request = host.branch_state(sid, session.rows[0]).target
        assert request is not None
        writers.clear()
        child = await host.request_branch(request)
        assert child is not None and published == ["Planning (branch 1)"]
        assert writers == [child]  # the tab's writer only: no second open to rename it
        child_session = host.session(child)
        assert child_session is not None and child_session.writer is not None
        own = commits_of(host.store, child)[-1]
        assert [e["type"] for e in own] == ["session/fork", "session/title"]
        assert child_session.writer.projection.title == "Planning (branch 1)"
        assert host.title(child) == host.index.by_id[child].title == "Planning (branch 1)"
        second = await host.request_branch(request)
        assert second is not None and host.title(second) == "Planning (branch 2)"
        await host.shutdown()

    asyncio.run(scenario())


def test_closing_a_running_conversation_commits_the_turn_as_cancelled(tmp_path: Path) -> None:
    async def scenario() -> str:
        host = _host(tmp_path, delay=0.02)
        session = host.create_session()
        running = asyncio.ensure_future(host.send(session.session_id, "a long answer please"))
        while not session.running:
            await asyncio.sleep(0.01)
        changes = await host.close_session(session.session_id)
        assert changes.sidebar and session.session_id in changes.sessions
        assert (await running).end_reason == "cancelled"
        assert host.session(session.session_id) is None
        await host.shutdown()
        return session.session_id

    sid = asyncio.run(scenario())
    turns = SessionStore(tmp_path).read(sid).projection.turns
    assert [t.end_reason for t in turns] == ["cancelled"]
    assert not SessionStore(tmp_path).is_being_written(sid)


def test_start_sweeps_half_built_sessions_and_indexes_manifests(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    sid = seed_session(store, ["kept"])
    (store.sessions_dir / ".tmp-half-built").mkdir()
    (store.sessions_dir / "broken-manifest-0001").mkdir()
    (store.sessions_dir / "broken-manifest-0001" / "manifest.json").write_text("{")

    async def scenario() -> None:
        host = _host(tmp_path)
        assert list(host.index.by_id) == [sid]
        assert [n.code for n in host.notices.history] == ["invalid_manifest"]
        await host.shutdown()

    asyncio.run(scenario())
    assert not (store.sessions_dir / ".tmp-half-built").exists()


def test_a_failing_view_never_breaks_a_running_turn(tmp_path: Path) -> None:
    async def scenario() -> None:
        host = _host(tmp_path)

        def broken_view(changes: Changes) -> None:
            raise RuntimeError("view bug")

        host.subscribe(broken_view)
        session = host.create_session()
        result = await host.send(session.session_id, "still fine?")
        assert result.end_reason == "completed"
        assert session.projection is not None and session.projection.open_turn is None
        internal = [n for n in host.notices.history if n.code == "internal_error"]
        assert internal and "view bug" in (internal[0].detail or "")
        await host.shutdown()

    asyncio.run(scenario())
