"""How much durable work a branch click and a streamed turn do, counted through the real ``Host``.

Counts, never times: every ``os.fsync`` of one click (journal, reservation,
child, publish, acknowledgement) and of one streamed turn. What each
remaining fsync of a click is for is written down in ``docs/storage.md``,
"Fsyncs of a branch click".
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from helpers.click_counts import count_branch_click, count_streamed_turn, counting
from helpers.forking import children_per_operation

from branchwise.core.providers.demo import DemoProvider
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.backends import Checkpoint, CrashPoint
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.journal import JOURNAL_NAME, read_journal_document

CLICK_FSYNCS = 11
"""Journal pending 2, reservation 2, child 4, publish 1, journal completed 2."""


def test_a_branch_click_makes_at_most_eleven_fsyncs(tmp_path: Path) -> None:
    with counting() as counts:
        title, click = asyncio.run(count_branch_click(tmp_path, 3, counts))
    assert title == "question 0 (branch 1)"
    assert click["fsync"] <= CLICK_FSYNCS, click
    # One read of the child (its tab), nothing replayed, nothing committed after the publish.
    assert click["writer open"] == 1 and click["scan"] == 1
    assert click["replay"] == click["fork replay"] == click["commits"] == 0


def test_a_click_costs_the_same_on_a_longer_conversation(tmp_path: Path) -> None:
    with counting() as counts:
        _title, click = asyncio.run(count_branch_click(tmp_path, 40, counts))
    assert click["fsync"] <= CLICK_FSYNCS, click


def test_a_streamed_turn_fsyncs_only_its_commits(tmp_path: Path) -> None:
    """One fsync per commit and none besides (partial commits, if any, each count one)."""
    with counting() as counts:
        turn = asyncio.run(count_streamed_turn(tmp_path, 3, counts))
    assert turn["commits"] >= 2  # the question, then the closing answer
    assert turn["fsync"] == turn["commits"], turn
    assert turn["scan"] == turn["replay"] == turn["writer open"] == 0


def test_a_removal_a_crash_undid_reopens_the_same_child_once(tmp_path: Path) -> None:
    """The journal's removal is not synced: a crash may bring the completed record back.

    The document as it stood when the tab had opened (right before the
    removal) is put back, as a power cut after the unsynced unlink would
    leave it; the next start re-opens that same child, forks nothing, and
    removes the record.
    """
    journal = tmp_path / JOURNAL_NAME
    before_removal: list[bytes] = []

    def checkpoint(point: str) -> None:
        if point == CrashPoint.TAB_OPENED:
            before_removal.append(journal.read_bytes())

    def new_host(checkpoint: Checkpoint | None = None) -> tuple[Host, list[str]]:
        host = Host(
            tmp_path, provider_factory=lambda _s: DemoProvider(delay=0.0), checkpoint=checkpoint
        )
        opened: list[str] = []

        async def navigate(session_id: str) -> None:
            opened.append(session_id)

        host.navigator = navigate
        host.start()
        return host, opened

    async def click() -> str:
        host, opened = new_host(checkpoint=checkpoint)
        session = host.create_session()
        await host.send(session.session_id, "where to?")
        target = host.branch_state(session.session_id, session.rows[0]).target
        assert target is not None
        child = await host.request_branch(target)
        assert child is not None and opened == [child]
        await host.shutdown()
        return child

    child = asyncio.run(click())
    assert not journal.exists()
    [document] = before_removal
    journal.write_bytes(document)
    restored = read_journal_document(tmp_path)
    assert restored is not None
    assert [op["state"] for op in restored["operations"]] == ["completed"]

    async def restart() -> tuple[tuple[str, ...], list[str]]:
        host, opened = new_host()
        summary = await host.fork_coordinator.recover()
        await host.shutdown()
        return summary.opened, opened

    recovered, opened = asyncio.run(restart())
    assert recovered == (child,) and opened == [child]
    assert not journal.exists()
    assert list(children_per_operation(SessionStore(tmp_path)).values()) == [1]
