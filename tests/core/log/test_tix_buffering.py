"""A writer keeps ``.tix`` records and writes them in batches: a lagging ``.tix`` is only slower.

The ``.idx`` (what a fork reads) is written after every commit; the ``.tix``
(only cold fork targets read it) up to :data:`TURNS_BUFFERED` records late, and
whole at roll and close. A live writer's or a killed writer's short ``.tix``
must give the same targets as a replay, and a fork at the newest turn must
still be planned from the index.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from helpers.segment_worker import HELPER
from helpers.segmented import read_turn_rows
from helpers.sessions import complete_turn, session_with_turns

from branchwise.core.fork.seeding import plan_from_index
from branchwise.core.fork.targets import ForkTargetSet, fork_targets, targets_from_projection
from branchwise.core.log.segments import log_pieces
from branchwise.core.log.sidecars import TURNS_BUFFERED, read_index
from branchwise.core.store.store import SessionStore


def replayed(store: SessionStore, session_id: str) -> ForkTargetSet:
    snapshot = store.read(session_id)
    return targets_from_projection(snapshot.projection, snapshot.manifest)


def only_segment(store: SessionStore, session_id: str) -> Path:
    (piece,) = log_pieces(store.session_dir(session_id), store.manifest(session_id))
    return piece.path


def test_a_live_writers_tix_lags_but_targets_and_forks_do_not(store: SessionStore) -> None:
    session_id = session_with_turns(store, 3, "live")
    with store.open_writer(session_id) as writer:
        for n in range(5):
            complete_turn(writer, f"live-{n}")
        segment = only_segment(store, session_id)
        assert len(read_turn_rows(segment) or []) == 3  # the five new records are kept
        assert len(read_index(segment) or []) == 8  # the .idx has every turn
        assert fork_targets(store, session_id) == replayed(store, session_id)
        last = writer.projection.turns[-1]
        assert last.boundary_sequence is not None
        manifest = store.manifest(session_id)
        plan = plan_from_index(
            store.session_dir(session_id), manifest, last.boundary_sequence, last.turn_id
        )
        assert plan is not None and plan.boundary == last.boundary_sequence
    assert len(read_turn_rows(segment) or []) == 8  # written whole at close


def test_a_full_batch_is_written_before_close(store: SessionStore) -> None:
    session_id = session_with_turns(store, 1, "batch")
    with store.open_writer(session_id) as writer:
        for n in range(TURNS_BUFFERED):
            complete_turn(writer, f"b-{n}")
        rows = read_turn_rows(only_segment(store, session_id)) or []
        assert len(rows) == 1 + TURNS_BUFFERED
        assert fork_targets(store, session_id) == replayed(store, session_id)


def test_a_killed_writers_short_tix_gives_the_replays_targets_and_is_rebuilt(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path / "root")
    session_id = session_with_turns(store, 2, "killed")
    proc = subprocess.Popen(
        [sys.executable, str(HELPER), "roll", str(store.root), session_id, str(10**9)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    for line in proc.stdout:
        if line == "done w4\n":
            break
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    segment = only_segment(store, session_id)
    turns = [t.turn_id for t in store.read(session_id).projection.turns]
    assert len(turns) >= 7
    assert len(read_turn_rows(segment) or []) < len(turns)  # the kept records died with it
    assert fork_targets(store, session_id) == replayed(store, session_id)
    with store.open_writer(session_id):
        pass  # a writer open rebuilds the active segment's caches
    assert [row.turn_id for row in read_turn_rows(segment) or []] == turns
    assert fork_targets(store, session_id) == replayed(store, session_id)
