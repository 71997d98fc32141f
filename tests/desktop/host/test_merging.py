"""Bringing a branch back from the desktop host, headless: what is offered and what is written."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers.forking import branch_with_own_turn

from branchwise.core.errors import InvalidMerge, NotAncestor
from branchwise.core.providers.demo import DemoProvider
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.merge_journal import MergeJournal
from branchwise.desktop.host.merging import bring_back, merge, parent_of, summarize


def test_a_closed_parent_receives_the_chosen_answer(tmp_path: Path) -> None:
    parent, child = branch_with_own_turn(tmp_path)
    host = Host(tmp_path, provider_factory=lambda _settings: DemoProvider())
    host.start()
    seen: list[Changes] = []
    host.subscribe(seen.append)
    assert parent_of(host, child) == parent and parent_of(host, parent) is None
    # Only the branch's own turn is offered, not the one it inherited.
    answers = asyncio.run(host.operations.branch_answers(child))
    assert [a.turn_id for a in answers] == ["c1"]
    content = asyncio.run(host.operations.chosen_answers(child, ["c1"]))
    result = bring_back(host, child, content, "answer")
    assert result.parent_session_id == parent and result.created
    merges = host.store.read(parent).projection.merges
    assert [(m["childSessionId"], m["content"], m["kind"]) for m in merges] == [
        (child, "answer to what about Kyoto?", "answer")
    ]
    assert any(parent in c.transcripts for c in seen)
    # Each confirm is a new merge (a fresh operation id), never a replay of the last.
    assert bring_back(host, child, content, "answer").merge_sequence > result.merge_sequence


def test_refusals_write_nothing(tmp_path: Path) -> None:
    parent, child = branch_with_own_turn(tmp_path)
    host = Host(tmp_path, provider_factory=lambda _settings: DemoProvider())
    host.start()
    with pytest.raises(NotAncestor):
        bring_back(host, parent, "text", "note")
    with pytest.raises(InvalidMerge):
        bring_back(host, child, "   ", "note")
    assert host.store.read(parent).projection.merges == []
    summary = asyncio.run(summarize(host, child))
    assert summary.startswith("Summary of the branch (1 turn):")


def test_the_dialogs_merge_writes_a_closed_parent_off_the_loop_and_names_its_initiator(
    tmp_path: Path,
) -> None:
    parent, child = branch_with_own_turn(tmp_path)
    host = Host(tmp_path, provider_factory=lambda _settings: DemoProvider())
    host.start()
    seen: list[Changes] = []
    host.subscribe(seen.append)
    dialog = object()

    async def scenario() -> None:
        result = await merge(host, child, "Kyoto it is.", "note", initiator=dialog)
        assert result is not None and result.parent_session_id == parent

    asyncio.run(scenario())
    merges = host.store.read(parent).projection.merges
    assert [(m["content"], m["kind"]) for m in merges] == [("Kyoto it is.", "note")]
    [changes] = [c for c in seen if parent in c.transcripts]
    assert changes.initiator is dialog
    assert MergeJournal(tmp_path).records() == ()  # written, so no longer pending
