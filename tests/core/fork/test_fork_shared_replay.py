"""Forks sharing a :class:`TargetsCache` (``branchwise serve``): the same children, never stale.

The sources here have no turn index (format 1, as an older version or an
import wrote them), so every fork validates its cut by replay: with a cache,
from the shared replay and one kept plan of the seeds.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from benchmarks.common import build_session
from helpers.forking import children_per_operation
from helpers.sessions import commits_of, complete_turn, log_file

from branchwise.core.errors import StaleSource, TurnOpen
from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import TargetsCache, fork_targets
from branchwise.core.projection.projection import Projection
from branchwise.core.store.publish import replace_log
from branchwise.core.store.store import SessionStore


def _request(store: SessionStore, source: str, index: int = -1) -> ForkRequest:
    answer = fork_targets(store, source)
    target = answer.targets[index]
    assert target.boundary_sequence is not None
    return ForkRequest(source, target.turn_id, target.boundary_sequence, answer.generation)


def _turns(store: SessionStore, session_id: str) -> list[tuple[str, str | None]]:
    projection: Projection = store.read(session_id).projection
    return [(turn.turn_id, turn.message_id) for turn in projection.turns]


def test_forks_with_a_cache_make_the_children_forks_without_one_make(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root")
    source = build_session(store.root, 6)
    cache = TargetsCache()
    for attempt, index in enumerate((-1, 2, -1)):  # a plan worked out, another, the kept one
        request = _request(store, source, index)
        cached = fork(store, request, f"op_cached_{attempt}", cache=cache)
        plain = fork(store, request, f"op_plain_{attempt}")
        assert cached.created
        assert _turns(store, cached.child_session_id) == _turns(store, plain.child_session_id)
        assert len(_turns(store, cached.child_session_id)) == (6 if index == -1 else 3)


def test_concurrent_forks_of_one_source_each_make_their_one_child(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root")
    source = build_session(store.root, 20)
    request, cache = _request(store, source), TargetsCache()
    operations = [f"op_{n % 10}" for n in range(30)]  # each operation asked three times
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda op: fork(store, request, op, cache=cache), operations))
    per_operation = {
        op: {r.child_session_id for r, o in zip(results, operations, strict=True) if o == op}
        for op in set(operations)
    }
    assert all(len(children) == 1 for children in per_operation.values())
    assert children_per_operation(store) == {f"op_{n}": 1 for n in range(10)}
    assert sum(r.created for r in results) == 10


def test_a_kept_plan_never_outlives_a_rewind_a_torn_tail_or_a_migration(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root")
    source = build_session(store.root, 3)
    cache = TargetsCache()
    last = _request(store, source)
    fork(store, last, "op_first", cache=cache)

    log = log_file(store.session_dir(source))
    whole = log.read_bytes()
    log.write_bytes(whole[:-10])  # the last turn's closing commit torn: that turn is open
    with pytest.raises(TurnOpen):
        fork(store, last, "op_torn", cache=cache)
    log.write_bytes(whole)
    assert fork(store, last, "op_whole", cache=cache).created

    with store.open_writer(source) as writer:  # an append (and a format-1 log migrated)
        complete_turn(writer, "t_more")
    again = fork(store, last, "op_after_append", cache=cache)
    assert len(_turns(store, again.child_session_id)) == 3
    assert fork(store, _request(store, source), "op_new_turn", cache=cache).created

    replace_log(store, source, commits_of(store, source)[:3])  # a rewind: one turn left
    with pytest.raises(StaleSource):
        fork(store, last, "op_stale", cache=cache)
    rewound = fork(store, _request(store, source), "op_rewound", cache=cache)
    assert len(_turns(store, rewound.child_session_id)) == 1
