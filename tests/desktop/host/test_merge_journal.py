"""Merges the desktop could not write yet: pending before any write, written later, never twice."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import HELPERS_DIR
from helpers.forking import branch_with_own_turn

from branchwise.core.conversation.merge import merge_back
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.merge_journal import JOURNAL_NAME, MergeJournal, PendingMerge
from branchwise.desktop.host.merging import bring_back, resume_merges

WORKER = HELPERS_DIR / "workers.py"


def _host(root: Path) -> Host:
    host = Host(root, provider_factory=lambda _settings: DemoProvider())
    host.start()
    return host


def _merges(root: Path, parent: str) -> list[str]:
    return [m["content"] for m in SessionStore(root).read(parent).projection.merges]


def test_a_parent_held_by_another_process_gets_the_merge_once_it_is_free(
    tmp_path: Path,
) -> None:
    parent, child = branch_with_own_turn(tmp_path)
    host = _host(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, str(WORKER), str(tmp_path), parent, "hold"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert bring_back(host, child, "Kyoto it is.", "note") is None
        assert _merges(tmp_path, parent) == []
        (pending,) = MergeJournal(tmp_path).records()
        assert (pending.parent_session_id, pending.content) == (parent, "Kyoto it is.")
        assert host.notices.history[-1].code == "merge_pending"
        assert resume_merges(host) == 0  # still held: still pending
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait()
        holder.stdout.close()
    assert resume_merges(host) == 1
    assert _merges(tmp_path, parent) == ["Kyoto it is."]
    assert MergeJournal(tmp_path).records() == ()
    assert resume_merges(host) == 0
    assert _merges(tmp_path, parent) == ["Kyoto it is."]


def test_after_a_crash_on_either_side_of_the_commit_the_restart_leaves_exactly_one_merge(
    tmp_path: Path,
) -> None:
    parent, child = branch_with_own_turn(tmp_path)
    store = SessionStore(tmp_path)
    journal = MergeJournal(tmp_path)
    # Killed after the pending record, before the commit:
    journal.put(PendingMerge("desktop-before", child, parent, "first", "note", 1.0))
    # Killed after the commit, before the record was removed:
    journal.put(PendingMerge("desktop-after", child, parent, "second", "note", 2.0))
    merge_back(store, child, parent, "second", "note", "desktop-after")

    restarted = _host(tmp_path)
    assert resume_merges(restarted) == 2
    assert sorted(_merges(tmp_path, parent)) == ["first", "second"]
    assert MergeJournal(tmp_path).records() == ()


def test_a_merge_refused_for_good_is_dropped_with_its_reason(tmp_path: Path) -> None:
    parent, child = branch_with_own_turn(tmp_path)
    MergeJournal(tmp_path).put(PendingMerge("desktop-x", child, parent, "   ", "note", 1.0))
    host = _host(tmp_path)
    assert resume_merges(host) == 0
    assert MergeJournal(tmp_path).records() == ()
    assert host.notices.history[-1].code == "invalid_merge"
    assert _merges(tmp_path, parent) == []


def test_a_damaged_journal_is_moved_aside_and_nothing_is_guessed(tmp_path: Path) -> None:
    (tmp_path / JOURNAL_NAME).write_bytes(b'{"version": 1, "operations": [')
    assert MergeJournal(tmp_path).records() == ()
    assert [p.name.startswith(JOURNAL_NAME + ".bad-") for p in tmp_path.iterdir()] == [True]
    (tmp_path / JOURNAL_NAME).write_bytes(
        b'{"version": 1, "operations": [{"operationId": "x", "childSessionId": "../etc"}]}'
    )
    assert MergeJournal(tmp_path).records() == ()
