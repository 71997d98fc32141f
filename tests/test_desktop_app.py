"""The ``branchwise`` entry point opens the window on a data root, and lists only manifests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
from gui_helpers import seed_session

from branchwise.core.store import TEMP_PREFIX, SessionStore


def _start_app(root: Path, *extra: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "BRANCHWISE_EXIT_AFTER_SHOW": "1"}
    return subprocess.run(
        [sys.executable, "-m", "branchwise.desktop.entry", "--data-dir", str(root), *extra],
        capture_output=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_the_app_shows_its_window_on_a_data_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = SessionStore(root)
    seed_session(store, ["one"])
    never_read = seed_session(store, ["two"])
    # A log that would block any reader forever: start-up must not open it.
    log = store.session_dir(never_read) / "events.log"
    log.unlink()
    os.mkfifo(log)
    half_built = store.sessions_dir / f"{TEMP_PREFIX}crashed-fork"
    half_built.mkdir()

    done = _start_app(root, "--lang", "zh_Hans")

    assert done.returncode == 0, done.stderr.decode()
    shown = orjson.loads(done.stdout.splitlines()[-1])
    assert shown["shown"] is True
    assert shown["sessions"] == 2
    assert not half_built.exists()


def test_the_app_creates_a_missing_data_root(tmp_path: Path) -> None:
    root = tmp_path / "fresh" / "root"
    done = _start_app(root)
    assert done.returncode == 0, done.stderr.decode()
    assert orjson.loads(done.stdout.splitlines()[-1])["sessions"] == 0
    assert (root / "sessions").is_dir()
    assert oct(root.stat().st_mode & 0o777) == oct(0o700)
