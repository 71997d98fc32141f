"""What the command line refuses before any command runs, in real processes with real bytes.

Linux hands a program its arguments as bytes; Python decodes them with
``surrogateescape``, so a byte that is not UTF-8 used to reach orjson (or a
manifest) as a lone surrogate and crash with a traceback.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest
from helpers.cli import cli_command, run_cli
from helpers.sessions import session_with_turns, tree_hashes

from branchwise.core.store.store import SessionStore

BAD = b"caf\xe9 \xff"  # Latin-1 "café" and a byte no UTF-8 text contains


def _run_bytes(root: Path, *args: bytes) -> tuple[int, dict, str]:
    """Run the CLI with raw byte arguments; exit status, the JSON line, stderr."""
    command = [os.fsencode(part) for part in cli_command(root)]
    proc = subprocess.run([*command, *args], capture_output=True, timeout=120)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stdout + proc.stderr
    return proc.returncode, orjson.loads(lines[0]), proc.stderr.decode("utf-8", "replace")


@pytest.fixture
def seeded(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "root"
    return root, session_with_turns(SessionStore(root), 1)


@pytest.mark.parametrize(
    ("args", "argument"),
    [
        ((b"session", b"say", b"{sid}", BAD, b"--quiet"), "text"),
        ((b"session", b"new", b"--title", BAD), "--title"),
        ((b"session", b"new", b"--title=" + BAD), "--title"),
        ((b"session", b"fork", b"{sid}", b"--turn", BAD), "--turn"),
        (
            (b"session", b"fork", b"{sid}", b"--turn", b"t0", b"--operation-id", BAD),
            "--operation-id",
        ),
        ((b"session", b"fork", b"{sid}", b"--turn", b"t0", b"--child-id", BAD), "--child-id"),
        ((b"session", b"child", b"{sid}", b"--title", BAD), "--title"),
        ((b"session", b"say", BAD, b"hello"), "session_id"),
        ((b"session", b"show", BAD), "session_id"),
        ((b"session", b"say", b"{sid}", b"hi", b"--model", BAD), "--model"),
        ((b"session", b"say", b"{sid}", b"hi", b"--provider", BAD), "--provider"),
        ((b"--lang", BAD, b"session", b"list"), "--lang"),
    ],
)
def test_undecodable_bytes_are_refused_naming_the_argument(
    seeded: tuple[Path, str], args: tuple[bytes, ...], argument: str
) -> None:
    root, sid = seeded
    before = tree_hashes(root)
    code, body, stderr = _run_bytes(root, *(a.replace(b"{sid}", sid.encode()) for a in args))
    assert code == 2
    assert body["error"]["code"] == "invalid_argument"
    assert body["error"]["argument"] == argument
    assert argument in body["error"]["message"]
    assert "\\xff" in body["error"]["value"]  # the bad bytes are shown, escaped
    assert "Traceback" not in stderr
    assert tree_hashes(root) == before  # refused before anything ran


def test_an_undecodable_data_folder_is_refused_and_not_created(tmp_path: Path) -> None:
    folder = os.fsencode(tmp_path) + b"/data-" + BAD
    command = [os.fsencode(part) for part in cli_command(tmp_path)]
    proc = subprocess.run(
        [*command, b"--data-dir", folder, b"session", b"new"], capture_output=True, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    assert orjson.loads(proc.stdout)["error"]["argument"] == "--data-dir"
    assert sorted(os.listdir(os.fsencode(tmp_path))) == []


@pytest.mark.parametrize("value", [str(2**64), str(2**63), str(10**30), "-1", str(-(2**70))])
@pytest.mark.parametrize("option", ["--boundary", "--generation"])
def test_fork_numbers_out_of_range_are_typed(
    seeded: tuple[Path, str], option: str, value: str
) -> None:
    root, sid = seeded
    before = tree_hashes(root)
    code, body = run_cli(root, "session", "fork", sid, "--turn", "t0", option, value, check=False)
    assert code == 2
    assert body["error"] == {
        "code": "invalid_argument",
        "message": f"argument {option} must be between 0 and {2**63 - 1}",
        "argument": option,
        "value": value,
    }
    assert tree_hashes(root) == before
    assert not (root / "fork-index").exists()


def test_the_largest_boundary_is_a_plain_refusal(seeded: tuple[Path, str]) -> None:
    root, sid = seeded
    code, body = run_cli(
        root, "session", "fork", sid, "--turn", "t0", "--boundary", str(2**63 - 1), check=False
    )
    assert code == 1 and body["error"]["code"] == "stale_source"


def test_serve_port_out_of_range_is_typed(tmp_path: Path) -> None:
    code, body = run_cli(tmp_path / "root", "serve", "--port", "70000", check=False)
    assert code == 2
    assert body["error"]["code"] == "invalid_argument"
    assert body["error"]["argument"] == "--port"


def test_an_empty_child_id_is_refused_not_generated(seeded: tuple[Path, str]) -> None:
    root, sid = seeded
    before = tree_hashes(root)
    for args in (
        ("session", "child", sid, "--title", "side", "--child-id", ""),
        ("session", "fork", sid, "--turn", "t0", "--child-id", ""),
    ):
        code, body = run_cli(root, *args, check=False)
        assert code == 1, args
        assert body["error"]["code"] == "invalid_session_id", args
    assert tree_hashes(root) == before
    assert sorted(p.name for p in (root / "sessions").iterdir()) == [sid]


def test_version_prints_the_package_version(tmp_path: Path) -> None:
    from importlib.metadata import version

    proc = subprocess.run(
        [*cli_command(tmp_path / "root"), "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"branchwise {version('branchwise')}"
    assert not (tmp_path / "root").exists()
