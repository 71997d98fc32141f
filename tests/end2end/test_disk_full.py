"""A really full disk: the ``branchwise`` command line and ``serve`` on a tiny tmpfs.

The data folder lives on a 1 MiB tmpfs (mounting needs root, as in CI; the
tests skip elsewhere) that a filler file fills to the last byte. ``session
new``, ``fork`` and ``say`` each answer ``{"error": {"code": "disk_full"}}``
with exit 1 and leave nothing behind; ``serve`` answers a fork with a JSON
507. Once the filler is removed, the same commands succeed.

Also here, as it is the same "never plain text" promise: an unexpected
failure inside ``serve`` is a JSON 500 ``internal_error``.

A first ``search`` on a nearly full disk (an 8 MiB tmpfs with 1.5 MB left)
answers from an index kept in memory and leaves every byte it found free.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.cli import run_cli
from helpers.serve import serve_process
from helpers.sessions import log_file

from branchwise.core.fork.operations import INDEX_DIR
from branchwise.core.projection import events as ev
from branchwise.core.store.store import SessionStore


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir()
    if os.geteuid() != 0:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
        capture_output=True,
    )
    return done.returncode == 0


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A mounted 1 MiB tmpfs (skips if this machine cannot mount one)."""
    mount = tmp_path / "tiny"
    if not _mount_tmpfs(mount, "1m"):
        pytest.skip("mounting a tmpfs needs root and the mount command")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path) -> Path:
    """Fill ``disk`` to its last byte with one file; return it (delete it to free the space)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (64 * 1024, 4096, 1):
            block = b"\0" * size
            while True:
                try:
                    os.write(fd, block)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    finally:
        os.close(fd)
    return filler


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _source(root: Path) -> tuple[str, str]:
    """A session with one finished turn (its id and the turn's id)."""
    _, created = run_cli(root, "session", "new", "--title", "source")
    session_id = created["sessionId"]
    _, said = run_cli(root, "session", "say", session_id, "one", "--quiet")
    return session_id, said["turnId"]


def test_new_fork_and_say_on_a_full_disk_answer_disk_full(tiny_disk: Path) -> None:
    root = tiny_disk / "root"
    source, turn = _source(root)
    _, untitled = run_cli(root, "session", "new")
    untitled_id = untitled["sessionId"]
    source_log = (log_file(root / "sessions" / source)).read_bytes()
    filler = _fill(tiny_disk)
    sessions = _entries(root / "sessions")

    code, new = run_cli(root, "session", "new", "--title", "no room", check=False)
    assert (code, new["error"]["code"]) == (1, "disk_full"), new
    code, forked = run_cli(
        root, "session", "fork", source, "--turn", turn, "--operation-id", "op-full", check=False
    )
    assert (code, forked["error"]["code"]) == (1, "disk_full"), forked
    assert forked["error"]["operationId"] == "op-full"
    code, said = run_cli(root, "session", "say", untitled_id, "hello full disk", check=False)
    assert (code, said["error"]["code"]) == (1, "disk_full"), said
    assert {"questionSaved", "answerSaved", "turnClosed"} <= said["error"].keys()

    # Nothing half-built, nothing stray, the source untouched.
    assert _entries(root / "sessions") == sessions
    assert _entries(root / INDEX_DIR) == []
    assert (log_file(root / "sessions" / source)).read_bytes() == source_log
    # The first say's turn is closed as an error, or left for the next writer to close
    # as interrupted when not even that fitted.
    _, shown = run_cli(root, "session", "show", untitled_id)
    assert [t.get("endReason") for t in shown["turns"]] in ([], ["error"], [None])

    filler.unlink()  # the space comes back
    _, forked = run_cli(
        root, "session", "fork", source, "--turn", turn, "--operation-id", "op-full"
    )
    assert forked["created"]
    _, again = run_cli(root, "session", "fork", source, "--turn", turn, "--operation-id", "op-full")
    assert not again["created"] and again["childSessionId"] == forked["childSessionId"]
    _, new = run_cli(root, "session", "new", "--title", "room again")
    _, said = run_cli(root, "session", "say", untitled_id, "hello again", "--quiet")
    assert said["endReason"] == "completed"
    _, shown = run_cli(root, "session", "show", untitled_id)
    listed = {s["sessionId"]: s for s in run_cli(root, "session", "list")[1]["sessions"]}
    assert listed[untitled_id]["title"] == shown["title"] != ""
    assert all(t["endReason"] in ("completed", "error", "interrupted") for t in shown["turns"])


def test_serve_answers_a_fork_on_a_full_disk_with_json_507(tiny_disk: Path) -> None:
    root = tiny_disk / "root"
    source, turn = _source(root)
    body = {
        "sourceSessionId": source,
        "turnId": turn,
        "boundarySequence": run_cli(root, "session", "targets", source)[1]["targets"][0][
            "boundarySequence"
        ],
        "expectedGeneration": 1,
        "operationId": "op-served",
    }
    with serve_process(root) as server:
        filler = _fill(tiny_disk)
        auth = {"Authorization": f"Bearer {server.token}"}
        with httpx.Client(base_url=server.url, headers=auth, timeout=30) as client:
            full = client.post("/fork-session", json=body)
            assert full.status_code == 507
            assert full.headers["content-type"].startswith("application/json")
            assert full.json()["error"]["code"] == "disk_full"
            assert _entries(root / INDEX_DIR) == []
            filler.unlink()
            made = client.post("/fork-session", json=body)
            assert made.status_code == 200 and made.json()["created"]


def test_an_unexpected_failure_in_serve_is_a_json_500(tmp_path: Path) -> None:
    root = tmp_path / "root"
    source, turn = _source(root)
    (root / INDEX_DIR).write_bytes(b"not a folder")  # the fork's reservation cannot be made
    boundary = run_cli(root, "session", "targets", source)[1]["targets"][0]["boundarySequence"]
    body = {
        "sourceSessionId": source,
        "turnId": turn,
        "boundarySequence": boundary,
        "expectedGeneration": 1,
        "operationId": "op-broken",
    }
    with serve_process(root) as server:
        auth = {"Authorization": f"Bearer {server.token}"}
        with httpx.Client(base_url=server.url, headers=auth, timeout=30) as client:
            broken = client.post("/fork-session", json=body)
    assert broken.status_code == 500
    assert broken.headers["content-type"].startswith("application/json")
    assert broken.json()["error"]["code"] == "internal_error"


def _fill_leaving(disk: Path, room: int) -> int:
    """Fill ``disk`` until ``room`` bytes are free; return the free bytes then."""
    stat = os.statvfs(disk)
    free = stat.f_bavail * stat.f_frsize
    with open(disk / "filler", "wb") as filler:
        filler.write(b"\0" * max(0, free - room))
    stat = os.statvfs(disk)
    return stat.f_bavail * stat.f_frsize


def test_a_search_on_a_nearly_full_disk_leaves_the_space_it_found(tmp_path: Path) -> None:
    disk = tmp_path / "small"
    if not _mount_tmpfs(disk, "8m"):
        pytest.skip("mounting a tmpfs needs root and the mount command")
    try:
        root = disk / "root"
        store = SessionStore(root)
        words = [f"{w}{n}" for w in ("lorem", "ipsum", "dolor", "amet") for n in range(400)]
        for s in range(8):  # about 830 KB of logs: their index does not fit in 1.5 MB
            with store.create(f"notes {s}") as writer:
                for t in range(20):
                    text = " ".join(
                        words[(s * 7 + t * 13 + i * 31) % len(words)] for i in range(250)
                    )
                    writer.commit([ev.turn_start(f"t{s}-{t}"), ev.user_message(f"u{s}-{t}", text)])
                    writer.commit([ev.turn_end(f"t{s}-{t}", "completed")])
        free = _fill_leaving(disk, 1_500_000)

        code, found = run_cli(root, "search", "lorem7", check=False)
        assert code == 0 and found["total"] > 0, found  # answered from an index kept in memory
        stat = os.statvfs(disk)
        assert stat.f_bavail * stat.f_frsize >= free  # no index, no write-ahead log left behind
        code, created = run_cli(root, "session", "new", "--title", "room left", check=False)
        assert code == 0, created
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_serve_answers_a_turn_on_a_full_disk_with_json_507(tiny_disk: Path) -> None:
    root = tiny_disk / "root"
    source, _ = _source(root)
    with serve_process(root) as server:
        filler = _fill(tiny_disk)
        auth = {"Authorization": f"Bearer {server.token}"}
        with httpx.Client(base_url=server.url, headers=auth, timeout=30) as client:
            full = client.post(f"/sessions/{source}/turns", json={"text": "no room"})
            assert full.status_code == 507, full.text
            assert full.json()["error"]["code"] == "disk_full"
            filler.unlink()
            ran = client.post(f"/sessions/{source}/turns", json={"text": "room again"})
            assert ran.status_code == 200
            assert '"type"' in ran.text
