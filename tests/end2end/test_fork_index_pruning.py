"""Starting the app prunes ``fork-index/`` past the horizon, keeping what the journal names."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
from helpers.cli import run_cli

from branchwise.core.fork.operations import RESERVATION_HORIZON, ForkRequest, OperationIndex
from branchwise.desktop.host.journal import OperationRecord, OperationsJournal, OperationState

OLD = RESERVATION_HORIZON + 3600.0


def _age(path: Path, seconds: float) -> None:
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))


def test_the_app_prunes_old_reservations_at_start(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "Trip")
    source = created["sessionId"]
    run_cli(root, "session", "say", source, "Where to?", "--quiet")
    _, targets = run_cli(root, "session", "targets", source)
    turn = targets["targets"][0]["turnId"]
    children = {}
    for op in ("op-old", "op-new", "op-journalled"):
        _, forked = run_cli(root, "session", "fork", source, "--turn", turn, "--operation-id", op)
        children[op] = forked["childSessionId"]
    index = OperationIndex(root)
    _age(index._path("op-old"), OLD)
    _age(index._path("op-journalled"), OLD)
    boundary = targets["targets"][0]["boundarySequence"]
    pending = ForkRequest(source, turn, boundary, 1)
    # An unfinished click of long ago that used op-journalled: its reservation must stay.
    OperationsJournal(root).put(
        OperationRecord(
            "op-journalled", pending, OperationState.PENDING, None, None, time.time() - OLD, 0.0
        )
    )

    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "BRANCHWISE_EXIT_AFTER_SHOW": "1"}
    shown = subprocess.run(
        [sys.executable, "-m", "branchwise.desktop.entry", "--data-dir", str(root)],
        capture_output=True,
        timeout=60,
        env=env,
        check=False,
    )

    assert shown.returncode == 0, shown.stderr.decode()
    assert orjson.loads(shown.stdout.splitlines()[-1])["shown"] is True
    assert not index._path("op-old").exists()
    assert index.lookup("op-new") is not None
    assert index.lookup("op-journalled") is not None
    _, listed = run_cli(root, "session", "list")
    ids = {s["sessionId"] for s in listed["sessions"]}
    assert set(children.values()) <= ids  # pruning a reservation never touches its child
