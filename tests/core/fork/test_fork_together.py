"""Forks made durable together (``fork_together``): each call answered as ``fork`` would.

A group shares one file-system sync; its calls do not share their fate: a
refusal belongs to its call, a full disk refuses what is not yet durable and
leaves nothing of it, and a SIGKILL at any moment leaves whole children only,
which a retry of every operation completes to exactly one child each.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import random
import time
from pathlib import Path

import pytest
from helpers.faults import DiskFullAt
from helpers.forking import children_per_operation, make_source, request_for
from helpers.kills import kill_fractions, start_forked, time_forked

from branchwise.core.errors import BranchwiseError, DiskFull
from branchwise.core.fork.engine import ForkCall, ForkResult, fork, fork_together
from branchwise.core.fork.operations import INDEX_DIR, OperationIndex
from branchwise.core.fork.targets import TargetsCache
from branchwise.core.store.store import TEMP_PREFIX, SessionStore


def _messages(store: SessionStore, session_id: str) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in store.read(session_id).projection.messages]


def _no_leftovers(store: SessionStore, *, reservations: bool = True) -> None:
    """No unpublished folder; with ``reservations``, no reservation's temporary file either.

    A kill between a reservation's write and its link leaves one; old reservations are
    pruned with it.
    """
    assert not [p.name for p in store.sessions_dir.iterdir() if p.name.startswith(TEMP_PREFIX)]
    index = store.root / INDEX_DIR
    if reservations and index.exists():
        assert not [p.name for p in index.iterdir() if p.name.startswith(".")]


def test_each_call_gets_what_fork_would_answer_and_refusals_stay_their_own(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path)
    source = make_source(store, turns=3)
    other = make_source(store, turns=1, title="other")
    first, last = request_for(store, source, 0), request_for(store, source, 2)
    earlier = fork(store, first, "op-earlier")  # a retry of it answers the same child
    stale = dataclasses.replace(last, expected_generation=last.expected_generation + 1)
    unknown = dataclasses.replace(last, turn_id="turn_nope")
    calls = [
        ForkCall(last, "op-a", title="Branch A"),
        ForkCall(stale, "op-stale"),
        ForkCall(request_for(store, other), "op-other"),
        ForkCall(first, "op-earlier"),
        ForkCall(unknown, "op-unknown"),
        ForkCall(last, "op-earlier"),  # the same operation for another cut
        ForkCall(last, "op-twice"),
        ForkCall(last, "op-twice"),  # the same operation twice in one group
    ]
    outcomes = fork_together(store, calls, cache=TargetsCache())

    codes = [o.code if isinstance(o, BranchwiseError) else None for o in outcomes]
    refusals = ["stale_source", "unknown_turn", "operation_conflict"]
    assert codes == [None, refusals[0], None, None, refusals[1], refusals[2], None, None]
    made = [o for o in outcomes if isinstance(o, ForkResult)]
    assert [o.created for o in made] == [True, True, False, True, False]
    assert made[2].child_session_id == earlier.child_session_id
    assert made[3].child_session_id == made[4].child_session_id
    per_op = children_per_operation(store)
    assert per_op == {"op-a": 1, "op-other": 1, "op-earlier": 1, "op-twice": 1}
    branch = made[0].child_session_id
    assert store.read(branch).manifest.title == "Branch A"
    assert _messages(store, branch) == _messages(store, source.session_id)
    assert _messages(store, made[1].child_session_id) == _messages(store, other.session_id)
    index = OperationIndex(store.root)
    assert index.lookup("op-stale") is None and index.lookup("op-unknown") is None
    _no_leftovers(store)
    # A child of the group forks again, at an inherited turn (its seeds' index answers).
    again = fork(store, dataclasses.replace(first, source_session_id=branch), "op-grandchild")
    assert _messages(store, again.child_session_id) == _messages(store, source.session_id)[:2]


def test_a_full_disk_at_any_step_answers_disk_full_and_leaves_nothing_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every space-taking call of a group of three forks fails in turn, once or for good."""
    steps, refused = {}, 0
    for persistent in (False, True):
        store = SessionStore(tmp_path / f"persistent-{persistent}")
        source = make_source(store, turns=2)
        requests = [request_for(store, source, 0), request_for(store, source, 1)]
        expected = {0: _messages(store, source.session_id)[:2]}
        expected[1] = _messages(store, source.session_id)
        for at in range(1, 200):
            calls = [ForkCall(requests[n % 2], f"op-{at}-{n}") for n in range(3)]
            faults = DiskFullAt(at, persistent=persistent)
            with faults.armed_in(monkeypatch):
                outcomes = fork_together(store, calls)
            if not faults.fired:
                assert all(isinstance(o, ForkResult) for o in outcomes)
                steps[persistent] = at - 1
                break
            # (a fault on ``mkdir`` of a folder that exists is one the kernel never returns)
            refused += any(isinstance(o, DiskFull) for o in outcomes)
            index = OperationIndex(store.root)
            for n, (call, outcome) in enumerate(zip(calls, outcomes, strict=True)):
                if isinstance(outcome, ForkResult):
                    child = outcome.child_session_id
                    assert _messages(store, child) == expected[n % 2]
                else:
                    assert isinstance(outcome, DiskFull), outcome
                    assert outcome.details["operationId"] == call.operation_id
                    assert index.lookup(call.operation_id) is None
            _no_leftovers(store)
            retried = fork_together(store, calls)  # the space came back
            assert all(isinstance(o, ForkResult) for o in retried)
            per_op = children_per_operation(store)
            assert all(per_op[call.operation_id] == 1 for call in calls)
        else:
            raise AssertionError("the group never ran out of steps to fail")
    # The shared sync is one of the steps: a group does far fewer than three forks alone.
    assert 15 <= steps[False] == steps[True]
    assert refused >= 2 * steps[False] - 4


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="kills a forked process")
def test_a_kill_at_any_moment_leaves_whole_children_and_a_retry_makes_each_once(
    tmp_path: Path,
) -> None:
    """A forked process runs groups of forks and is SIGKILLed at a random moment, 120 times."""
    rng = random.Random(17)
    store = SessionStore(tmp_path)
    source = make_source(store, turns=2)
    requests = [request_for(store, source, 0), request_for(store, source, 1)]
    expected = [_messages(store, source.session_id)[:2], _messages(store, source.session_id)]

    def calls_of(name: str) -> list[ForkCall]:
        return [ForkCall(requests[n % 2], f"op-{name}-{n}") for n in range(6)]

    rounds, published, took = 120, {"none": 0, "some": 0, "all": 0}, []
    for round_, fraction in enumerate(kill_fractions(rng, rounds)):
        # Timed right before each kill: a group's syncfs waits for whatever the disk
        # holds at that moment, so a time taken once does not hold for the whole sweep.
        took.append(time_forked([functools.partial(fork_together, store, calls_of(f"t{round_}"))]))
        calls = calls_of(str(round_))
        child = start_forked(functools.partial(fork_together, store, calls))
        time.sleep(fraction * took[-1])
        child.kill()
        made = children_per_operation(store)
        assert all(made[call.operation_id] <= 1 for call in calls)
        count = sum(made[call.operation_id] for call in calls)
        published["none" if not count else "all" if count == len(calls) else "some"] += 1
        store.sweep_temporary()  # the next start sweeps what the kill left unpublished
        outcomes = fork_together(store, calls)
        assert all(isinstance(o, ForkResult) for o in outcomes), outcomes
        made = children_per_operation(store)
        assert all(made[call.operation_id] == 1 for call in calls)
        for n, outcome in enumerate(outcomes):
            assert isinstance(outcome, ForkResult)
            assert _messages(store, outcome.child_session_id) == expected[n % 2]
        _no_leftovers(store, reservations=False)
    print(
        f"{rounds} kills over groups of {min(took) * 1000:.1f} to {max(took) * 1000:.1f} ms;"
        f" published before the retry: {published}"
    )
    assert published["none"] >= 10 and published["some"] + published["all"] >= 10, published
