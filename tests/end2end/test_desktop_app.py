"""The ``branchwise`` entry point opens the window on a data root, and lists only manifests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
from helpers.gui import seed_session
from helpers.sessions import log_file

from branchwise.core.store.store import TEMP_PREFIX, SessionStore


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
    log = log_file(store.session_dir(never_read))
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


def test_a_second_app_on_the_same_data_root_is_refused_with_its_reason(tmp_path: Path) -> None:
    from branchwise.core.fs.locks import InstanceLock

    root = tmp_path / "root"
    SessionStore(root)
    first = InstanceLock(root)  # the first app's lock, held by this process
    try:
        refused = _start_app(root)
        assert refused.returncode == 1
        error = orjson.loads(refused.stdout.splitlines()[-1])["error"]
        assert error["code"] == "app_running" and str(root) in error["message"]
    finally:
        first.release()
    assert _start_app(root).returncode == 0  # the lock died with its holder


def test_last_times_tabs_come_back_and_a_trashed_one_is_skipped_with_a_notice(
    tmp_path: Path,
) -> None:
    from branchwise.core.ids import new_session_id
    from branchwise.desktop.host.window_state import (
        WindowState,
        load_window_state,
        save_window_state,
    )

    root = tmp_path / "root"
    store = SessionStore(root)
    first, second = seed_session(store, ["one"]), seed_session(store, ["two"])
    gone = new_session_id()
    save_window_state(root, WindowState(tabs=(first, gone, second), current=second))

    done = _start_app(root)

    assert done.returncode == 0, done.stderr.decode()
    shown = orjson.loads(done.stdout.splitlines()[-1])
    assert (shown["tabs"], shown["current"]) == ([first, second], second)
    assert "tabs_not_restored" in shown["notices"]
    saved = load_window_state(root)
    assert saved is not None and saved.tabs == (first, second) and saved.geometry


def test_a_damaged_window_state_opens_an_empty_window(tmp_path: Path) -> None:
    root = tmp_path / "root"
    SessionStore(root)
    (root / "window-state.json").write_bytes(b'{"format": 1, "tabs": [1, 2')
    done = _start_app(root)
    assert done.returncode == 0, done.stderr.decode()
    shown = orjson.loads(done.stdout.splitlines()[-1])
    assert shown["shown"] is True and shown["tabs"] == []
