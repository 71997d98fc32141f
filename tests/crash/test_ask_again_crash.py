"""SIGKILL during edit and regenerate: no branch, or one whole branch with its prompt, never two."""

from __future__ import annotations

import contextlib
import io
import random
import shutil
import signal
import sys
import time
from collections import Counter

import pytest
from helpers import HELPERS_DIR
from helpers.kills import kill_moments, start_worker, time_worker
from helpers.sessions import session_with_turns

from branchwise.core.cli.main import main as cli
from branchwise.core.store.store import SessionStore

WORKER = HELPERS_DIR / "ask_again_worker.py"
KILLS = 150


def _check_whole(store: SessionStore, child: str, source: str) -> str:
    """Assert ``child`` is one whole branch holding its prompt; return its operation."""
    manifest = store.manifest(child)
    operation = str(manifest.created_by_operation)
    assert manifest.parent is not None and manifest.parent.origin is not None
    scan = store.read(child).scan
    assert scan.corruption is None
    commits = [frame.events for frame in scan.frames]
    own = next(c for c in commits if c[0]["type"] == "session/fork")
    assert own[0]["parentSessionId"] == source and own[0]["operationId"] == operation
    kinds = [event["type"] for event in own]
    assert kinds[-2:] == ["turn/start", "message/user"]  # the prompt is in the publish
    expected = f"edited for {operation}" if manifest.parent.origin.kind == "edit" else "question 1"
    assert own[-1]["content"] == expected == manifest.parent.origin.prompt
    return operation


def _retry(store: SessionStore, source: str, operation: str) -> int:
    number = int(operation.rsplit("-", 1)[1])
    action = (
        ["edit", source, "--turn", "t1", f"edited for {operation}"]
        if number % 2 == 0
        else ["regenerate", source, "--turn", "t1"]
    )
    with contextlib.redirect_stdout(io.StringIO()):
        return cli(["--data-dir", str(store.root), "session", *action, "--operation-id", operation])


@pytest.mark.slow
def test_sigkilled_edits_and_regenerations_leave_no_branch_or_one_whole_one(
    store: SessionStore,
) -> None:
    source = session_with_turns(store, 3)
    timed = store.root.with_name("timed")  # a copy: the timing run's kill lands anywhere
    shutil.copytree(store.root, timed)
    took = time_worker([sys.executable, str(WORKER), str(timed), source, "t1"], until="done ")
    moments = kill_moments(random.Random(20261204), took, KILLS)
    working = [sys.executable, str(WORKER), str(store.root), source, "t1"]
    branches: dict[str, str] = {}  # operation -> its branch
    interrupted_published = interrupted_unpublished = 0
    for moment in moments:
        proc = start_worker(working)
        time.sleep(moment)
        proc.send_signal(signal.SIGKILL)
        lines = proc.communicate()[0].splitlines()
        started = [line.split()[1] for line in lines if line.startswith("op ")]
        done = {line.split()[1] for line in lines if line.startswith("done ")}
        published = {p.name for p in store.sessions_dir.iterdir() if not p.name.startswith(".")}
        for child in published - set(branches.values()) - {source}:
            operation = _check_whole(store, child, source)
            assert operation not in branches  # never two branches for one operation
            branches[operation] = child
        killed = [op for op in started if op not in done]
        if killed:  # the interrupted operation, retried as its user would
            (operation,) = killed
            before = branches.get(operation)
            if before is None:
                interrupted_unpublished += 1
            else:
                interrupted_published += 1
            assert _retry(store, source, operation) == 0
            after = {p.name for p in store.sessions_dir.iterdir() if not p.name.startswith(".")}
            new = after - published
            if before is not None:
                assert not new  # the same branch was finished, no second one
            else:
                (child,) = new
                assert _check_whole(store, child, source) == operation
                branches[operation] = child
            turn = store.read(branches[operation]).projection.turns[-1]
            assert turn.end_reason in ("completed", "interrupted")
        store.sweep_temporary()
        assert not [p for p in store.sessions_dir.iterdir() if p.name.startswith(".")]
    operations = Counter(str(store.manifest(c).created_by_operation) for c in branches.values())
    assert all(count == 1 for count in operations.values())
    # The kills landed both before and after a publish.
    assert interrupted_unpublished and interrupted_published, (
        interrupted_unpublished,
        interrupted_published,
    )
    for child in branches.values():  # finished or retried: every branch's turn is closed
        assert not store.read(child).projection.turns[-1].is_open
    print(
        f"{KILLS} kills: {interrupted_unpublished} before a publish, "
        f"{interrupted_published} after it, {len(branches)} branches"
    )
