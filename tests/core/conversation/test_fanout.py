"""Making a fan-out's branches: one journaled operation, durable together, all or nothing."""

from __future__ import annotations

import functools
import os
import random
import time
from pathlib import Path

import pytest
from helpers.faults import DiskFullAt
from helpers.forking import make_source
from helpers.kills import kill_fractions, start_forked, time_forked

from branchwise.core.conversation.fanout import (
    INDEX_DIR,
    FanoutIndex,
    branch_operation,
    fan_out,
    fanout_targets,
)
from branchwise.core.errors import DiskFull, InvalidFanout, OperationConflict
from branchwise.core.fork.operations import INDEX_DIR as FORK_INDEX_DIR
from branchwise.core.fork.operations import OperationIndex
from branchwise.core.store.manifest import Manifest
from branchwise.core.store.store import TEMP_PREFIX, SessionStore

PROMPT = "Which route is fastest?"


def _branches_of(store: SessionStore, source: str) -> list[Manifest]:
    return [
        m
        for m in store.iter_manifests()
        if isinstance(m, Manifest) and m.parent is not None and m.parent.session_id == source
    ]


def _nothing_left(store: SessionStore, source: str, operation_id: str, count: int) -> None:
    """No branch, no unpublished folder, no record or reservation of the operation."""
    assert _branches_of(store, source) == []
    assert not [p for p in store.sessions_dir.iterdir() if p.name.startswith(TEMP_PREFIX)]
    assert FanoutIndex(store.root).lookup(operation_id) is None
    forks = OperationIndex(store.root)
    assert all(forks.lookup(branch_operation(operation_id, n)) is None for n in range(1, count + 1))
    for folder in (INDEX_DIR, FORK_INDEX_DIR):
        directory = store.root / folder
        if directory.exists():
            assert not [p.name for p in directory.iterdir() if p.name.startswith(".")]


def _check_branches(store: SessionStore, source: str, asked: list[tuple[str, int]]) -> None:
    """Exactly one branch per target, each with its model, label and the question."""
    branches = _branches_of(store, source)
    assert sorted((m.label.text, m.label.number or 0) for m in branches if m.label) == sorted(asked)
    assert len(branches) == len(asked)
    for manifest in branches:
        projection = store.read(manifest.session_id).projection
        turn = projection.turns[-1]
        assert turn.is_open  # published with its question, waiting for its answer
        assert projection.message(turn.user_message_id).content == PROMPT
        assert manifest.label is not None
        assert projection.settings.model == manifest.label.text


def test_targets_count_models_and_samples() -> None:
    targets = fanout_targets(["a", "b"], None, "d")
    assert [(t.model, t.sample, t.label) for t in targets] == [("a", 0, "a"), ("b", 0, "b")]
    targets = fanout_targets([], 3, "d")
    assert [t.label for t in targets] == ["d · sample 1", "d · sample 2", "d · sample 3"]
    assert [t.sample for t in fanout_targets(["a", "a", "b"], None, "d")] == [1, 2, 0]
    for models, samples in (([], None), (["a"] * 9, None), (["a", "b"], 5), (["a"], 0)):
        with pytest.raises(InvalidFanout):
            fanout_targets(models, samples, "d")


def test_a_retry_returns_the_same_branches_and_another_request_conflicts(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path)
    source = make_source(store, turns=3).session_id
    targets = fanout_targets(["llama3.2", "qwen2.5"], 2, "demo")
    first = fan_out(store, source, PROMPT, targets, "op-1")
    assert all(b.created for b in first.branches)
    again = fan_out(store, source, PROMPT, targets, "op-1")
    assert [b.session_id for b in again.branches] == [b.session_id for b in first.branches]
    assert not any(b.created for b in again.branches)
    _check_branches(
        store, source, [("llama3.2", 1), ("llama3.2", 2), ("qwen2.5", 1), ("qwen2.5", 2)]
    )
    for prompt, asked in ((PROMPT + "?", targets), (PROMPT, targets[:3])):
        with pytest.raises(OperationConflict):
            fan_out(store, source, prompt, asked, "op-1")
    assert len(_branches_of(store, source)) == 4


@pytest.mark.parametrize("persistent", [False, True])
def test_a_full_disk_refuses_every_branch_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, persistent: bool
) -> None:
    store = SessionStore(tmp_path)
    targets = fanout_targets(["a", "b", "c"], None, "demo")
    asked = [("a", 0), ("b", 0), ("c", 0)]
    refusals = 0
    for at in range(1, 300):
        source = make_source(store, turns=2, title=f"source {at}").session_id
        faults = DiskFullAt(at, persistent=persistent)
        with faults.armed_in(monkeypatch):
            try:
                fan_out(store, source, PROMPT, targets, f"op-{at}")
            except DiskFull as refused:
                assert refused.details["operationId"] == f"op-{at}"
                refusals += 1
                _nothing_left(store, source, f"op-{at}", 3)
        if not faults.fired:
            break
        # Once there is room again the same operation makes exactly the asked branches.
        fan_out(store, source, PROMPT, targets, f"op-{at}")
        _check_branches(store, source, asked)
    else:
        raise AssertionError("the fan-out never ran out of steps to fail")
    _check_branches(store, source, asked)
    assert refusals >= at - 6  # (a fault on a folder that exists or a removal is survived)
    assert at > 10


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="kills a forked process")
def test_a_kill_while_the_group_is_made_is_finished_by_a_retry_to_exactly_the_asked_set(
    tmp_path: Path,
) -> None:
    """A forked process makes a fan-out of 4 and is SIGKILLed at a random moment, 40 times."""
    rng = random.Random(28)
    store = SessionStore(tmp_path)
    targets = fanout_targets(["a", "b"], 2, "demo")
    asked = [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    rounds, published = 40, {"none": 0, "some": 0, "all": 0}
    for round_, fraction in enumerate(kill_fractions(rng, rounds)):
        source = make_source(store, turns=2, title=f"source {round_}").session_id
        timing = make_source(store, turns=2, title=f"timing {round_}").session_id
        operation = f"op-{round_}"
        took = time_forked(
            [functools.partial(fan_out, store, timing, PROMPT, targets, f"t-{round_}")]
        )
        child = start_forked(functools.partial(fan_out, store, source, PROMPT, targets, operation))
        time.sleep(fraction * took)
        child.kill()
        count = len(_branches_of(store, source))
        published["none" if not count else "all" if count == 4 else "some"] += 1
        store.sweep_temporary()  # the next start sweeps what the kill left unpublished
        retried = fan_out(store, source, PROMPT, targets, operation)
        assert len({b.session_id for b in retried.branches}) == 4
        _check_branches(store, source, asked)
    print(f"{rounds} kills; branches published before the retry: {published}")
    assert published["none"] >= 3 and published["all"] >= 3, published
