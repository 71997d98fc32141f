"""SIGKILL sweeps on format 2: a writer killed at any step of its rolls, a migration at any step.

Each kill leaves a valid session of one format or the other: whole frames
only, every turn the worker reported done still there, and the next writer
open recovers (cutting a torn tail, closing an open turn) to a log that
verifies. A fork killed at any step is swept in ``test_fork_crash.py``.
"""

from __future__ import annotations

import random
import signal
import sys
import time
from pathlib import Path

import pytest
from helpers.kills import kill_moments, start_worker, time_worker
from helpers.segment_worker import HELPER
from helpers.segmented import as_format_1
from helpers.sessions import session_with_turns

from branchwise.core.fork.targets import fork_targets
from branchwise.core.log.segments import log_pieces
from branchwise.core.store.store import SessionStore, verify_session

ROLL_KILLS = 80
MIGRATION_KILLS = 80


def _turns(store: SessionStore, session_id: str) -> list[str]:
    return [t.turn_id for t in store.read(session_id).projection.turns]


@pytest.mark.slow
def test_a_writer_killed_anywhere_in_its_rolls_leaves_every_done_turn(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root")
    session_id = session_with_turns(store, 1)
    rng = random.Random(7)
    done: list[str] = []
    for _ in range(ROLL_KILLS):
        proc = start_worker(
            [sys.executable, str(HELPER), "roll", str(store.root), session_id, "700"]
        )
        time.sleep(rng.uniform(0.0, 0.05))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        done += [line.split()[1] for line in out.splitlines() if line.startswith("done ")]
        snap = store.read(session_id)
        assert snap.scan.corruption is None
        completed = [t.turn_id for t in snap.projection.turns if t.end_reason == "completed"]
        assert set(done) <= set(completed)  # every turn reported done is durable
        with store.open_writer(session_id) as writer:  # recovery: cut, close, rebuild
            assert writer.projection.open_turn is None
        report = verify_session(store, session_id)
        assert report["ok"] and report["tornTail"] is None, report
    segments = log_pieces(store.session_dir(session_id), store.manifest(session_id))
    assert len(segments) > 10  # the kills hit a writer that kept rolling
    cold = fork_targets(store, session_id)
    with store.open_writer(session_id) as writer:
        assert [t.turn_id for t in cold.targets] == [t.turn_id for t in writer.projection.turns]


@pytest.mark.slow
def test_a_migration_killed_at_any_step_leaves_one_format_or_the_other(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root")
    session_id = session_with_turns(store, 150)
    expected = _turns(store, session_id)
    targets = fork_targets(store, session_id).to_json()["targets"]
    migrating = [sys.executable, str(HELPER), "migrate", str(store.root), session_id]
    as_format_1(store, session_id)
    took = time_worker(migrating, until="done")
    formats = {1: 0, 2: 0}
    for moment in kill_moments(random.Random(11), took, MIGRATION_KILLS):
        as_format_1(store, session_id)
        proc = start_worker(migrating)
        time.sleep(moment)
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        formats[store.manifest(session_id).format] += 1
        assert _turns(store, session_id) == expected  # readable as it is, either format
        assert fork_targets(store, session_id).to_json()["targets"] == targets
        assert verify_session(store, session_id)["ok"]
        with store.open_writer(session_id):  # finishes or redoes the migration
            pass
        assert store.manifest(session_id).format == 2
        assert not (store.session_dir(session_id) / "events.log").exists()
        assert _turns(store, session_id) == expected
    assert formats[1] and formats[2], formats  # kills landed before and after the manifest
