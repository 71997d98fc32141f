"""The command line against a hostile or damaged data folder (issue 12, items 6, 7, 8, 9, 14).

Run as a user scripts it: the real ``branchwise`` commands in subprocesses,
on a real read-only folder, real symbolic links, real copied folders and
real damaged bytes. Every refusal is a typed ``{"error": …}`` with a
non-zero exit and no traceback; nothing outside the data root changes.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.cli import cli_command, run_cli
from helpers.sessions import cut_copies, log_file, tear_log, tree_hashes

from branchwise.core.log.scan import scan_bytes

NOBODY = 65534

# Runs a command as an unprivileged user: root ignores permission bits, so a
# read-only folder is only read-only for someone else. The interpreter (under
# /root, which that user cannot read) is started as root, the command's
# modules are imported and the language's catalog loaded (a fork names its
# branch in the user's language), and only then are the privileges dropped for good.
_AS_NOBODY = f"""
import os, sys
import asyncio, argparse, json, secrets, shutil, stat, errno, hashlib
import branchwise.core.cli.main as cli

from branchwise.core.i18n.language import _
_("{{title}} (branch {{n}})")
os.setgroups([])
os.setgid({NOBODY})
os.setuid({NOBODY})
sys.exit(cli.main(sys.argv[1:]))
"""


def _run(root: Path, *args: str, as_nobody: bool) -> tuple[int, Any, str]:
    if not as_nobody:
        command = [*cli_command(root), *args]
    else:
        command = [sys.executable, "-c", _AS_NOBODY, "--data-dir", str(root), *args]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd="/")
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode, orjson.loads(lines[-1]) if lines else None, proc.stderr


def _can_drop_to_nobody() -> bool:
    if os.geteuid() != 0:
        return False
    probe = subprocess.run(
        [sys.executable, "-c", f"import os; os.setgid({NOBODY}); os.setuid({NOBODY})"],
        capture_output=True,
    )
    return probe.returncode == 0


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A temporary folder another user can traverse (pytest's tmp_path is 0700 under root)."""
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="branchwise-ro-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for sub in [path, *path.rglob("*")]:
            if sub.is_dir() and not sub.is_symlink():
                sub.chmod(0o755)
        shutil.rmtree(path)


def _make_read_only(root: Path, as_nobody: bool) -> None:
    """Readable by the user the commands run as, writable by nobody but root."""
    for path in [*sorted(root.rglob("*"), reverse=True), root]:
        if as_nobody:
            path.chmod(0o755 if path.is_dir() else 0o644)  # root-owned: others read only
        else:
            path.chmod(0o555 if path.is_dir() else 0o444)


def _family(root: Path) -> tuple[str, str, str]:
    """A session with a finished turn, a fork of it and a child of it; return their ids."""
    _, created = run_cli(root, "session", "new", "--title", "source")
    source = created["sessionId"]
    _, said = run_cli(root, "session", "say", source, "hello", "--quiet")
    _, forked = run_cli(root, "session", "fork", source, "--turn", said["turnId"])
    _, child = run_cli(root, "session", "child", source, "--title", "kid")
    return source, forked["childSessionId"], child["childSessionId"]


def test_a_read_only_data_folder_reads_and_refuses_writes_typed(shared_tmp: Path) -> None:
    as_nobody = _can_drop_to_nobody()
    if os.geteuid() == 0 and not as_nobody:
        pytest.skip("running as root without the right to become another user")
    root = shared_tmp / "data"
    source, fork_id, child_id = _family(root)
    turn = run_cli(root, "session", "show", source)[1]["turns"][0]["turnId"]
    _make_read_only(root, as_nobody)
    before = tree_hashes(root)

    reads = {
        ("session", "list"): lambda r: len(r["sessions"]) == 3 and r["damaged"] == [],
        ("session", "show", source): lambda r: len(r["turns"]) == 1,
        ("session", "verify", source): lambda r: r["ok"] and r["commits"] >= 3,
        ("session", "targets", source): lambda r: r["targets"][0]["available"],
        ("session", "tree", source): lambda r: len(r["sessions"]) == 3,
        ("session", "lineage", fork_id): lambda r: r["complete"] and len(r["lineage"]) == 2,
    }
    for args, check in reads.items():
        code, result, stderr = _run(root, *args, as_nobody=as_nobody)
        assert code == 0 and check(result), (args, result, stderr)
        assert "Traceback" not in stderr

    writes = [
        ("session", "new", "--title", "no"),
        ("session", "say", source, "more", "--quiet"),
        ("session", "say", child_id, "more", "--quiet"),
        ("session", "fork", source, "--turn", turn),
        ("session", "child", source, "--title", "no"),
    ]
    for args in writes:
        code, result, stderr = _run(root, *args, as_nobody=as_nobody)
        assert code == 1, (args, result, stderr)
        assert result["error"]["code"] == "data_folder_read_only", (args, result)
        assert result["error"]["message"] and "Traceback" not in stderr
    assert tree_hashes(root) == before


def test_a_data_root_that_cannot_be_created_lists_nothing(shared_tmp: Path) -> None:
    as_nobody = _can_drop_to_nobody()
    if os.geteuid() == 0 and not as_nobody:
        pytest.skip("running as root without the right to become another user")
    parent = shared_tmp / "locked"
    parent.mkdir(mode=0o755 if as_nobody else 0o555)
    code, result, _ = _run(parent / "data", "session", "list", as_nobody=as_nobody)
    assert code == 0 and result == {"sessions": [], "damaged": []}
    code, result, _ = _run(parent / "data", "session", "new", as_nobody=as_nobody)
    assert code == 1 and result["error"]["code"] == "data_folder_read_only"
    assert list(parent.iterdir()) == []


def test_a_manifest_nobody_may_read_hides_no_other_session(shared_tmp: Path) -> None:
    as_nobody = _can_drop_to_nobody()
    if os.geteuid() == 0 and not as_nobody:
        pytest.skip("running as root without the right to become another user")
    root = shared_tmp / "data"
    _, good = run_cli(root, "session", "new", "--title", "good")
    _, bad = run_cli(root, "session", "new", "--title", "bad")
    _make_read_only(root, as_nobody)
    (root / "sessions" / bad["sessionId"] / "manifest.json").chmod(
        0o000 if not as_nobody else 0o600
    )
    code, listed, stderr = _run(root, "session", "list", as_nobody=as_nobody)
    assert code == 0, stderr
    assert [s["sessionId"] for s in listed["sessions"]] == [good["sessionId"]]
    assert [(d["code"], d["sessionId"], d["errno"]) for d in listed["damaged"]] == [
        ("manifest_unreadable", bad["sessionId"], 13)
    ]


# -- symbolic links (item 7) -----------------------------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside" / "precious.txt"
    target.parent.mkdir()
    target.write_bytes(b"not Branchwise's to touch\n")
    return target


def _plant(link: Path, target: Path) -> None:
    if link.is_dir() and not link.is_symlink():
        shutil.rmtree(link)
    elif os.path.lexists(link):
        link.unlink()
    link.symlink_to(target)


def _refused(root: Path, *args: str) -> dict[str, Any]:
    code, result, stderr = _run(root, *args, as_nobody=False)
    assert code == 1 and "Traceback" not in stderr, (args, result, stderr)
    assert result["error"]["code"] == "unsafe_path", (args, result)
    return dict(result["error"])


@pytest.mark.parametrize("name", ["log", "writer.lock", "manifest.json"])
def test_no_command_follows_a_planted_link_out_of_the_data_root(
    tmp_path: Path, outside: Path, name: str
) -> None:
    root = tmp_path / "root"
    source, _, _ = _family(root)
    turn = run_cli(root, "session", "show", source)[1]["turns"][0]["turnId"]
    if name == "log":  # the segment the writer appends to
        directory = root / "sessions" / source
        name = str(log_file(directory).relative_to(directory))
    _plant(root / "sessions" / source / name, outside)
    original = outside.read_bytes()

    _refused(root, "session", "say", source, "overwrite it", "--quiet")
    _refused(root, "session", "child", source, "--title", "c")
    if name != "writer.lock":
        _refused(root, "session", "show", source)
        _refused(root, "session", "targets", source)
        _refused(root, "session", "fork", source, "--turn", turn, "--boundary", "5")
    code, report, _ = _run(root, "session", "verify", source, as_nobody=False)
    assert code == 1 and [(f["code"], f["file"]) for f in report["findings"]] == [
        ("unsafe_path", name)
    ]
    assert outside.read_bytes() == original


def test_a_linked_session_folder_or_sessions_folder_is_refused(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "root"
    source, _, _ = _family(root)
    turn = run_cli(root, "session", "show", source)[1]["turns"][0]["turnId"]
    elsewhere = outside.parent / "a-session"
    shutil.copytree(root / "sessions" / source, elsewhere)
    before = tree_hashes(elsewhere)
    (root / "sessions" / "planted-0001").symlink_to(elsewhere, target_is_directory=True)

    _refused(root, "session", "say", "planted-0001", "write through", "--quiet")
    _refused(root, "session", "show", "planted-0001")
    _refused(root, "session", "fork", source, "--turn", turn, "--child-id", "planted-0001")
    _refused(root, "session", "child", source, "--title", "c", "--child-id", "planted-0001")
    _, listed = run_cli(root, "session", "list")
    assert len(listed["sessions"]) == 3
    assert [(d["code"], d["sessionId"]) for d in listed["damaged"]] == [
        ("unsafe_path", "planted-0001")
    ]
    assert tree_hashes(elsewhere) == before

    # The whole sessions/ folder swapped for a link: `new` writes nothing through it.
    moved = outside.parent / "sessions-elsewhere"
    (root / "sessions").rename(moved)
    (root / "sessions").symlink_to(moved, target_is_directory=True)
    before = tree_hashes(moved)
    _refused(root, "session", "new", "--title", "through the link")
    _refused(root, "session", "list")
    assert tree_hashes(moved) == before


# -- copied folders and unreadable manifests (items 8, 9) ----------------------------------------


def test_a_backup_copy_of_a_session_is_listed_once_and_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    source, fork_id, _ = _family(root)
    turn = run_cli(root, "session", "show", source)[1]["turns"][0]["turnId"]
    shutil.copytree(root / "sessions" / source, root / "sessions" / "backup-0001")
    _, listed = run_cli(root, "session", "list")
    assert sorted(s["sessionId"] for s in listed["sessions"]) == sorted(
        [source, fork_id, _family_child(listed, source)]
    )
    assert [s["sessionId"] for s in listed["sessions"]].count(source) == 1
    assert [(d["code"], d["sessionId"], d["manifestSessionId"]) for d in listed["damaged"]] == [
        ("manifest_mismatch", "backup-0001", source)
    ]
    copy = root / "sessions" / "backup-0001"
    before = tree_hashes(copy)
    for args in (
        ("session", "say", "backup-0001", "more", "--quiet"),
        ("session", "fork", "backup-0001", "--turn", turn),
        ("session", "child", "backup-0001", "--title", "c"),
        ("session", "show", "backup-0001"),
    ):
        code, result, stderr = _run(root, *args, as_nobody=False)
        assert code == 1 and result["error"]["code"] == "manifest_mismatch", (args, result)
        assert "Traceback" not in stderr
    assert tree_hashes(copy) == before
    code, report, _ = _run(root, "session", "verify", "backup-0001", as_nobody=False)
    assert code == 1 and report["findings"][0]["code"] == "manifest_mismatch"


def _family_child(listed: dict[str, Any], source: str) -> str:
    return next(
        s["sessionId"]
        for s in listed["sessions"]
        if s["parent"] and s["parent"]["kind"] == "child" and s["parent"]["sessionId"] == source
    )


def test_a_manifest_that_is_a_folder_hides_no_other_session(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, good = run_cli(root, "session", "new", "--title", "good")
    _, bad = run_cli(root, "session", "new", "--title", "bad")
    manifest = root / "sessions" / bad["sessionId"] / "manifest.json"
    manifest.unlink()
    manifest.mkdir()
    _, listed = run_cli(root, "session", "list")
    assert [s["sessionId"] for s in listed["sessions"]] == [good["sessionId"]]
    assert [(d["code"], d["sessionId"]) for d in listed["damaged"]] == [
        ("manifest_unreadable", bad["sessionId"])
    ]
    code, report, _ = _run(root, "session", "verify", bad["sessionId"], as_nobody=False)
    assert code == 1 and not report["ok"] and report["commits"] == 1
    assert [(f["code"], f["file"]) for f in report["findings"]] == [
        ("manifest_unreadable", "manifest.json")
    ]
    _, tree = run_cli(root, "session", "tree", good["sessionId"])
    assert len(tree["sessions"]) == 1
    assert stat.S_ISDIR(manifest.stat().st_mode)  # left as it is


# -- a damaged last commit (item 14) ------------------------------------------------------------


def test_say_cuts_only_a_torn_write_keeps_its_bytes_and_verify_reports_both(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "t")
    session_id = created["sessionId"]
    run_cli(root, "session", "say", session_id, "first", "--quiet")
    log = log_file(root / "sessions" / session_id)
    whole = log.read_bytes()
    last = scan_bytes(log.read_bytes()).frames[-1]

    # A bit flipped in the last, complete commit: read-only, nothing cut.
    flipped = bytearray(whole)
    flipped[last.end - 5] ^= 0x08
    log.write_bytes(bytes(flipped))
    code, result, _ = _run(root, "session", "say", session_id, "second", "--quiet", as_nobody=False)
    assert code == 1 and result["error"]["code"] == "corrupt_log"
    assert log.read_bytes() == bytes(flipped)
    code, report, _ = _run(root, "session", "verify", session_id, as_nobody=False)
    assert code == 1 and report["corruption"]["offset"] == last.offset
    assert report["tornTail"] is None

    # The same commit cut short by a crash: the next writer cuts it, keeping a copy.
    tear_log(log, whole[: last.end - 9])
    code, report, _ = _run(root, "session", "verify", session_id, as_nobody=False)
    assert code == 0 and report["tornTail"] == {
        "offset": last.offset,
        "length": last.end - 9 - last.offset,
    }
    run_cli(root, "session", "say", session_id, "second", "--quiet")
    (copy,) = cut_copies(root / "sessions" / session_id)
    assert copy.read_bytes() == whole[last.offset : last.end - 9]
    code, report, _ = _run(root, "session", "verify", session_id, as_nobody=False)
    assert code == 0 and report["ok"]
    assert [(f["code"], f["file"], f["offset"], f["length"]) for f in report["findings"]] == [
        ("log_tail_cut", f"log/{copy.name}", last.offset, last.end - 9 - last.offset)
    ]
