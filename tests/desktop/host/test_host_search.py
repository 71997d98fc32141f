"""The host keeps the search index current in the background (headless asyncio)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.gui import seed_session

from branchwise.core.errors import SearchIndexUnavailable
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.search.index import INDEX_NAME, SCHEMA_VERSION
from branchwise.desktop.host import host as host_module
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.host import Host


def _host(root: Path) -> Host:
    host = Host(root, provider_factory=lambda _settings: DemoProvider(delay=0.0))
    host.start()
    return host


def test_start_indexes_every_conversation_with_progress(tmp_path: Path) -> None:
    async def scenario() -> None:
        seed = Host(tmp_path, provider_factory=lambda _s: DemoProvider())
        for word in ("apricot", "banana", "cherry"):
            seed_session(seed.store, [f"tell me about {word}"])
        host = _host(tmp_path)
        progress: list[tuple[int, int] | None] = []
        host.subscribe(lambda c: progress.append(host.search_progress) if c.search else None)
        await host.search_idle()
        assert (3, 3) in progress and progress[-1] is None
        result = await host.search("banana")
        assert [hit.snippet for hit in result.hits if hit.role == "user"] == [
            "tell me about banana"
        ]
        await host.shutdown()

    asyncio.run(scenario())


def test_a_finished_turn_is_searchable(tmp_path: Path) -> None:
    async def scenario() -> None:
        host = _host(tmp_path)
        seen: list[Changes] = []
        host.subscribe(seen.append)
        session = host.create_session()
        await host.search_idle()
        assert not (await host.search("pomegranate")).hits
        await host.send(session.session_id, "what is a pomegranate")
        await host.search_idle()
        hits = (await host.search("pomegranate")).hits
        assert {hit.role for hit in hits} >= {"user", "title"}
        assert all(hit.session_id == session.session_id for hit in hits)
        assert any(c.search for c in seen)
        await host.shutdown()

    asyncio.run(scenario())


def test_a_branch_is_indexed_and_shares_the_inherited_message(tmp_path: Path) -> None:
    async def scenario() -> None:
        host = _host(tmp_path)

        async def navigate(_session_id: str) -> None:
            return None

        host.navigator = navigate
        sid = seed_session(host.store, ["the quokka question", "second"])
        session = host.open_session(sid)
        await host.search_idle()
        request = host.branch_state(sid, session.rows[0]).target
        assert isinstance(request, ForkRequest)
        child = await host.request_branch(request)
        assert child is not None
        await host.search_idle()
        hits = [h for h in (await host.search("quokka")).hits if h.role == "user"]
        assert len(hits) == 1
        assert {hits[0].session_id, *hits[0].also_in} == {sid, child}
        await host.shutdown()

    asyncio.run(scenario())


class _Unavailable:
    """An index that can neither be opened nor rebuilt (as a locked, unwritable file)."""

    def __init__(self, root: Path) -> None:
        raise SearchIndexUnavailable(f"cannot open {root / INDEX_NAME}")


def test_an_unusable_index_is_one_notice_and_turns_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(host_module, "SearchIndex", _Unavailable)

    async def scenario() -> None:
        host = _host(tmp_path)
        session = host.create_session()
        result = await host.send(session.session_id, "still answered")
        assert result.end_reason == "completed"
        await host.search_idle()
        assert (await host.search("answered")).hits == ()
        codes = [n.code for n in host.notices.history]
        assert codes.count("search_index_unavailable") == 1
        await host.shutdown()

    asyncio.run(scenario())


def test_an_index_of_an_older_version_is_rebuilt_in_the_background(tmp_path: Path) -> None:
    seed = Host(tmp_path, provider_factory=lambda _s: DemoProvider())
    seed_session(seed.store, ["tell me about 臺北 and figs"])
    with sqlite3.connect(tmp_path / INDEX_NAME) as old:  # version 1's layout
        old.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        old.execute("INSERT INTO meta VALUES ('schema', '1')")

    async def scenario() -> None:
        host = _host(tmp_path)
        progress: list[tuple[int, int] | None] = []
        host.subscribe(lambda c: progress.append(host.search_progress) if c.search else None)
        await host.search_idle()
        assert (1, 1) in progress  # the rebuild ran in the worker, with its progress shown
        hits = (await host.search("臺")).hits
        assert [hit.snippet for hit in hits if hit.role == "user"] == [
            "tell me about 臺北 and figs"
        ]
        await host.shutdown()

    asyncio.run(scenario())
    with sqlite3.connect(tmp_path / INDEX_NAME) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


def test_turns_another_process_wrote_are_found_by_a_later_search(tmp_path: Path) -> None:
    """The CLI writes without indexing; a search starts the app's quiet catch-up with it."""

    async def scenario() -> None:
        host = _host(tmp_path)
        await host.search_idle()
        seen: list[Changes] = []
        host.subscribe(seen.append)
        _, created = run_cli(tmp_path, "session", "new", "--title", "elsewhere")
        run_cli(tmp_path, "session", "say", created["sessionId"], "a capybara", "--quiet")
        assert (await host.search("capybara")).hits == ()  # answered at once, from the index
        await host.search_idle()
        assert any(change.search for change in seen)  # the field refreshes its results
        hits = (await host.search("capybara")).hits
        assert [(hit.session_id, hit.role) for hit in hits if hit.role == "user"] == [
            (created["sessionId"], "user")
        ]
        seen.clear()
        await host.search("capybara")  # within the interval: no second catch-up
        await host.search_idle()
        assert not any(change.search for change in seen)
        await host.shutdown()

    asyncio.run(scenario())
