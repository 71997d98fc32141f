"""A merge killed at any moment leaves no merge or one whole merge; a retry makes it exactly one."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from helpers.forking import fork_at
from helpers.merge_worker import HELPER, content
from helpers.sessions import complete_turn

from branchwise.core.conversation.merge import merge_back
from branchwise.core.store.store import SessionStore, verify_session

KILLS = 120


@pytest.mark.slow
def test_sigkilled_merges_are_each_written_exactly_once_after_a_retry(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root")
    with store.create("parent") as writer:
        complete_turn(writer, "t1", "question")
        parent = writer.session_id
    child = fork_at(store, parent, "t1").child_session_id
    with store.open_writer(child) as writer:
        complete_turn(writer, "c1", "side question")
    rng = random.Random(7)
    number = 0
    for _kill in range(KILLS):
        worker = subprocess.Popen(
            [sys.executable, str(HELPER), str(store.root), child, str(number)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0, 0.03))
        worker.send_signal(signal.SIGKILL)
        lines = worker.communicate(timeout=30)[0].split()
        started = [int(lines[i + 1]) for i, word in enumerate(lines) if word == "op"]
        if started:
            in_flight = started[-1]
            # The retry of the interrupted operation: its merge is written once, never twice.
            merge_back(store, child, None, content(in_flight), "note", f"merge-{in_flight}")
            number = in_flight + 1
    projection = store.read(parent).projection
    per_operation = Counter(m["operationId"] for m in projection.merges)
    assert per_operation and set(per_operation.values()) == {1}
    assert sorted(int(op.split("-")[1]) for op in per_operation) == list(range(number))
    for merge in projection.merges:
        assert merge["content"] == content(int(merge["operationId"].split("-")[1]))
    assert verify_session(store, parent)["ok"]
