"""``branchwise doctor`` in a real process: a healthy root, damage, a model server down and up.

The doctor only reads: every test also checks that the data root is byte for
byte (and mode for mode) what it was, torn tails and broken files included.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from helpers import HELPERS_DIR
from helpers.cli import cli_command
from helpers.sessions import log_file, session_with_turns, tear_log, tree_hashes

from branchwise.core.settings import Settings, save_settings
from branchwise.core.store.store import SessionStore

FAKE_SERVER = HELPERS_DIR / "fake_openai_server.py"
CHECKS = [
    "data folder",
    "sessions",
    "language catalogs",
    "Qt platform",
    "display",
    "settings",
    "fonts",
    "model server",
]


def _doctor(root: Path, *options: str) -> tuple[int, str]:
    proc = subprocess.run(
        [*cli_command(root), "doctor", *options], capture_output=True, text=True, timeout=180
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stdout


def _doctor_json(root: Path) -> tuple[int, dict[str, dict]]:
    code, out = _doctor(root, "--json", "--timeout", "2")
    report = orjson.loads(out)
    assert [check["name"] for check in report["checks"]] == CHECKS
    assert report["ok"] is (code == 0)
    return code, {check["name"]: check for check in report["checks"]}


def _state(root: Path) -> tuple[dict[str, str], int]:
    return tree_hashes(root), os.stat(root).st_mode


def _healthy_root(tmp_path: Path) -> tuple[Path, list[str]]:
    root = tmp_path / "root"
    store = SessionStore(root)
    return root, [session_with_turns(store, 2, "a"), session_with_turns(store, 1, "b")]


def test_a_healthy_root_passes_every_check_and_nothing_changes(tmp_path: Path) -> None:
    root, sessions = _healthy_root(tmp_path)
    # A torn last write is normal after a crash: reported, and not cut by the doctor.
    log = log_file(root / "sessions" / sessions[1])
    tear_log(log, log.read_bytes()[:-5])
    before = _state(root)
    code, text = _doctor(root)
    assert code == 0, text
    lines = text.splitlines()
    for name in CHECKS:
        assert any(line.split()[:1] == ["ok"] and name in line for line in lines), (name, text)
    assert "2 sessions, 0 damaged" in text and "torn" in text
    assert "offline demo responder, nothing to check" in text
    assert lines[-1] == "Everything looks fine."
    code, checks = _doctor_json(root)
    assert code == 0 and all(check["ok"] for check in checks.values())
    assert checks["data folder"]["detail"].startswith("mode 0700")
    assert _state(root) == before


def test_a_damaged_session_is_named_and_fails_the_doctor(tmp_path: Path) -> None:
    root, (good, bad) = _healthy_root(tmp_path)
    log = log_file(root / "sessions" / bad)
    damaged = bytearray(log.read_bytes())
    damaged[40] ^= 0xFF  # inside the first frame, with good frames after it: corruption
    log.write_bytes(bytes(damaged))
    broken = session_with_turns(SessionStore(root), 1, "c")
    (root / "sessions" / broken / "manifest.json").write_bytes(b"{not json")
    before = _state(root)
    code, text = _doctor(root)
    assert code == 1
    (line,) = [line for line in text.splitlines() if "sessions" in line]
    assert line.split()[0] == "FAIL"
    assert "3 sessions, 2 damaged" in line
    assert f"{bad} (corrupt_log)" in line and f"{broken} (invalid_manifest)" in line
    assert good not in line
    assert text.splitlines()[-1] == "1 problem found."
    assert _state(root) == before


def test_a_data_folder_others_can_enter_fails_and_is_left_as_it_is(tmp_path: Path) -> None:
    root, _ = _healthy_root(tmp_path)
    os.chmod(root, 0o755)
    code, checks = _doctor_json(root)
    assert code == 1 and not checks["data folder"]["ok"]
    assert "0755" in checks["data folder"]["detail"]
    assert os.stat(root).st_mode & 0o777 == 0o755
    missing = tmp_path / "missing"
    code, checks = _doctor_json(missing)
    assert code == 1 and "does not exist" in checks["data folder"]["detail"]
    assert not missing.exists()


def test_a_configured_model_server_that_is_down_fails(tmp_path: Path) -> None:
    root, _ = _healthy_root(tmp_path)
    with socket.socket() as sock:  # a port nothing listens on once this closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    save_settings(root, Settings(provider="openai", base_url=f"http://127.0.0.1:{port}/v1"))
    before = _state(root)
    code, checks = _doctor_json(root)
    assert code == 1
    assert checks["settings"]["ok"]
    assert not checks["model server"]["ok"]
    assert "provider_unreachable" in checks["model server"]["detail"]
    assert _state(root) == before


def test_a_configured_model_server_that_answers_passes(tmp_path: Path) -> None:
    root, _ = _healthy_root(tmp_path)
    with subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "--port", "0", "--models", "m1,m2"],
        stdout=subprocess.PIPE,
        text=True,
    ) as server:
        assert server.stdout is not None
        try:
            base_url = server.stdout.readline().strip()
            save_settings(root, Settings(provider="openai", base_url=base_url, model="m2"))
            code, checks = _doctor_json(root)
        finally:
            server.terminate()
    assert code == 0, checks
    assert checks["model server"]["detail"] == f"{base_url} answers with 2 models"


def test_unusable_settings_fail_without_being_moved_aside(tmp_path: Path) -> None:
    root, _ = _healthy_root(tmp_path)
    (root / "settings.json").write_bytes(b'{"format": 9}')
    before = _state(root)
    code, checks = _doctor_json(root)
    assert code == 1
    assert "unsupported_format" in checks["settings"]["detail"]
    assert not checks["model server"]["ok"]
    assert _state(root) == before


@pytest.mark.parametrize(("model", "ok"), [("typed-model", True), ("", False)])
def test_a_server_without_a_model_list_passes_only_with_a_typed_model(
    tmp_path: Path, model: str, ok: bool
) -> None:
    root, _ = _healthy_root(tmp_path)
    with subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "--port", "0", "--no-model-list"],
        stdout=subprocess.PIPE,
        text=True,
    ) as server:
        assert server.stdout is not None
        try:
            base_url = server.stdout.readline().strip()
            save_settings(root, Settings(provider="openai", base_url=base_url, model=model))
            code, checks = _doctor_json(root)
        finally:
            server.terminate()
    assert checks["model server"]["ok"] is ok
    assert code == (0 if ok else 1)
    detail = checks["model server"]["detail"]
    assert "lists no models" in detail
    assert ("typed-model" in detail) is ok
