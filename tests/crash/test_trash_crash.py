"""A delete or restore killed at any moment leaves each session live or trashed, whole."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.sessions import log_scan, session_with_turns
from helpers.trash_worker import HELPER

from branchwise.core.store.manifest import load_manifest
from branchwise.core.store.store import SessionStore, verify_session
from branchwise.core.store.trash import PURGE_PREFIX, Trash

KILLS = 150


def _whole(directory: Path, session_id: str, turns: int) -> None:
    assert load_manifest(directory).session_id == session_id
    scan = log_scan(directory)
    assert scan.torn_tail is None and scan.corruption is None
    assert sum(1 for f in scan.frames for e in f.events if e["type"] == "turn/end") == turns


@pytest.mark.slow
def test_sigkilled_trash_and_restore_leave_every_session_in_exactly_one_place(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path / "root")
    trash = Trash(store)
    ids = [session_with_turns(store, 3, title=f"s{n}") for n in range(4)]
    rng = random.Random(13)
    for _kill in range(KILLS):
        worker = subprocess.Popen(
            [sys.executable, str(HELPER), str(store.root), *ids],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0, 0.02))
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)
        worker.stdout.close()
        for session_id in ids:
            live, trashed = store.exists(session_id), trash.contains(session_id)
            assert live != trashed, (session_id, live, trashed)
            where = store.session_dir(session_id) if live else trash.session_dir(session_id)
            _whole(where, session_id, 3)
    listed = {m.session_id for m in store.list_sessions()} | {e.session_id for e in trash.entries()}
    assert listed == set(ids)
    for session_id in ids:
        if trash.contains(session_id):
            trash.restore(session_id)
        assert verify_session(store, session_id)["ok"]


@pytest.mark.slow
def test_a_purge_killed_after_its_rename_is_finished_by_the_sweep(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root")
    trash = Trash(store)
    session_id = session_with_turns(store, 2)
    trash.trash(session_id)
    # What a kill between purge's rename and its removal leaves: a dot-named, half-removed folder.
    doomed = trash.folder / f"{PURGE_PREFIX}{session_id}-killed"
    shutil.move(trash.session_dir(session_id), doomed)
    shutil.rmtree(doomed / "log")
    assert trash.entries() == [] and not store.exists(session_id)
    assert trash.sweep() == [doomed.name]
    assert list(trash.folder.iterdir()) == []
