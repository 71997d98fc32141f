"""Crash matrix: the app's real Host, run without its window, SIGKILLed at every point of a click.

Each case runs ``tests/helpers/host_process.py`` in a subprocess,
kills it with a real SIGKILL, starts it again (which runs recovery), and checks
the outcome on disk: exactly one child for the operation, open in a tab, and
an empty journal. The random sweep kills at random moments of the click.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import IO, Any

import orjson
import pytest
from helpers import HELPERS_DIR
from helpers.forking import Source, children_per_operation, fork_children, make_source
from helpers.host_process import CRASH_ENV, read_open_tabs
from helpers.kills import kill_moments

from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.backends import CrashPoint
from branchwise.desktop.host.journal import read_journal_document

pytestmark = pytest.mark.slow

HOST = [sys.executable, str(HELPERS_DIR / "host_process.py")]
DEADLINE = 30.0


def host_args(root: Path, source: Source | None = None, *extra: str) -> list[str]:
    click = ["--click", source.session_id, source.turn_ids[-1]] if source else []
    return [*HOST, "--data-dir", str(root), *click, *extra]


def env_with(crash_at: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    if crash_at:
        env[CRASH_ENV] = crash_at
    return env


def lines_of(stdout: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in stdout.splitlines() if line.strip()]


def read_until(stream: IO[bytes], key: str) -> dict[str, Any]:
    """Read JSON lines until one has ``key`` (the host is then at that point)."""
    while True:
        line = stream.readline()
        if not line:
            raise AssertionError(f"host exited before printing {key!r}")
        message = orjson.loads(line)
        if key in message:
            return message


def journal_operations(root: Path) -> list[dict[str, Any]]:
    document = read_journal_document(root)
    return [] if document is None else list(document["operations"])


def restart(root: Path) -> dict[str, Any]:
    """Start the host without a click (recovery only) and return what it printed."""
    proc = subprocess.run(
        host_args(root), capture_output=True, text=True, env=env_with(), timeout=DEADLINE
    )
    assert proc.returncode == 0, proc.stderr
    messages = lines_of(proc.stdout)
    [recovered] = [m["recovered"] for m in messages if "recovered" in m]
    return {"recovered": recovered, "notices": [m["notice"] for m in messages if "notice" in m]}


def assert_settled(store: SessionStore, source: Source) -> None:
    """After recovery: no journal, each operation one child, every child open."""
    root = store.root
    assert journal_operations(root) == []
    per_op = children_per_operation(store)
    assert all(count == 1 for count in per_op.values()), per_op
    assert None not in per_op
    children = {m.session_id for m in fork_children(store, source.session_id)}
    assert children <= set(read_open_tabs(root))
    assert not [p for p in store.sessions_dir.iterdir() if p.name.startswith(".")]


# What the disk shows right after a kill at each point, before recovery:
# (journal state of the one record or None, does the child exist, is its tab open)
EXPECTED_AT_KILL = {
    CrashPoint.PENDING_WRITTEN: ("pending", False, False),
    CrashPoint.FORK_STARTED: ("pending", False, False),
    CrashPoint.FORK_PUBLISHED: ("pending", True, False),
    CrashPoint.FORK_RETURNED: ("pending", True, False),
    CrashPoint.COMPLETED_WRITTEN: ("completed", True, False),
    CrashPoint.TAB_OPENED: ("completed", True, True),
    CrashPoint.ACKNOWLEDGED: (None, True, True),
}


@pytest.mark.parametrize("how", ["self_kill", "external_kill"])
@pytest.mark.parametrize("point", list(CrashPoint))
def test_kill_at_each_point_then_restart_leaves_one_open_child(
    store: SessionStore, point: CrashPoint, how: str
) -> None:
    source = make_source(store, turns=1)
    root = store.root
    if how == "self_kill":
        proc = subprocess.run(
            host_args(root, source), capture_output=True, env=env_with(point), timeout=DEADLINE
        )
        returncode = proc.returncode
    else:
        with subprocess.Popen(
            host_args(root, source, "--pause-at", point), stdout=subprocess.PIPE, env=env_with()
        ) as running:
            assert running.stdout is not None
            assert read_until(running.stdout, "paused")["paused"] == point
            running.send_signal(signal.SIGKILL)
            returncode = running.wait(DEADLINE)
    assert returncode == -signal.SIGKILL

    state, child_exists, tab_open = EXPECTED_AT_KILL[point]
    operations = journal_operations(root)
    assert [op["state"] for op in operations] == ([state] if state else [])
    children = fork_children(store, source.session_id)
    assert len(children) == (1 if child_exists else 0)
    assert bool(read_open_tabs(root)) == tab_open
    op_id = operations[0]["operationId"] if operations else children[0].created_by_operation

    after = restart(root)
    assert_settled(store, source)
    assert children_per_operation(store) == {op_id: 1}
    if state is None:
        assert after["recovered"]["count"] == 0 and after["notices"] == []
    else:
        assert after["recovered"]["count"] == 1
        assert after["notices"] == ["fork_recovered"]  # one notice, whatever happened


def test_random_kills_never_duplicate_or_lose_a_child(store: SessionStore) -> None:
    """Kill the host at random moments of >= 100 clicks; restart each time."""
    source = make_source(store, turns=1)
    root = store.root
    rng = random.Random(int(os.environ.get("BRANCHWISE_SWEEP_SEED", "6")))
    took = calibrate(root, source)
    kills, states = 0, Counter[str]()
    previous_children = len(fork_children(store, source.session_id))
    rounds = 110
    for moment in kill_moments(rng, took, rounds, spread=1.2):
        with subprocess.Popen(
            host_args(root, source, "--wait-go"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env_with(),
        ) as proc:
            assert proc.stdin is not None and proc.stdout is not None
            read_until(proc.stdout, "ready")  # recovery of the last kill is done
            assert_settled(store, source)
            now_children = len(fork_children(store, source.session_id))
            assert now_children - previous_children in (0, 1)
            previous_children = now_children
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
            time.sleep(moment)  # the kill moment itself, not a wait
            proc.send_signal(signal.SIGKILL)
            if proc.wait(DEADLINE) == -signal.SIGKILL:
                kills += 1
            states[kill_state(store, source, previous_children)] += 1
    restart(root)
    assert_settled(store, source)
    sys.stderr.write(f"random kills: {kills}/{rounds}, disk at kill: {dict(states)}\n")
    assert kills >= rounds // 2
    # The sweep must actually land inside the protocol, not only around it.
    assert states["pending"] + states["completed"] >= rounds // 10, states


def calibrate(root: Path, source: Source) -> float:
    """How long one click takes from "go" to its outcome, measured here."""
    with subprocess.Popen(
        host_args(root, source, "--wait-go"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env_with(),
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        read_until(proc.stdout, "ready")
        started = time.perf_counter()
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        assert read_until(proc.stdout, "outcome")["outcome"]["status"] == "opened"
        took = time.perf_counter() - started
        assert proc.wait(DEADLINE) == 0
    return took


def kill_state(store: SessionStore, source: Source, children_before: int) -> str:
    """Where the killed click stood: nothing, pending, completed, or done."""
    operations = journal_operations(store.root)
    if operations:
        return str(operations[0]["state"])
    grew = len(fork_children(store, source.session_id)) > children_before
    return "done" if grew else "nothing"
