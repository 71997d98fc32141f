"""``session say|edit --attach``, ``session show``'s attachments and ``session attachment``."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import orjson
import pytest
from helpers.attachments import png_bytes
from helpers.cli import cli_command, run_cli

from branchwise.core.errors import InvalidSettings
from branchwise.core.settings import validate_settings


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_say_with_files_show_them_and_write_one_out(tmp_path: Path) -> None:
    root = tmp_path / "root"
    image, notes = png_bytes(seed=5), b"# Notes\n"
    (tmp_path / "cat.png").write_bytes(image)
    (tmp_path / "notes.md").write_bytes(notes)
    _, made = run_cli(root, "session", "new")
    sid = made["sessionId"]
    _, said = run_cli(
        root,
        "session",
        "say",
        sid,
        "look",
        "--quiet",
        "--attach",
        str(tmp_path / "cat.png"),
        str(tmp_path / "notes.md"),
    )
    assert said["endReason"] == "completed"
    _, shown = run_cli(root, "session", "show", sid)
    question = shown["messages"][0]
    assert question["attachments"] == [
        {"name": "cat.png", "type": "image/png", "size": len(image), "sha256": _sha(image)},
        {"name": "notes.md", "type": "text/markdown", "size": len(notes), "sha256": _sha(notes)},
    ]
    assert "attachments" not in shown["messages"][1]
    out = tmp_path / "out.png"
    _, written = run_cli(root, "session", "attachment", sid, _sha(image), "--out", str(out))
    assert out.read_bytes() == image
    assert written == {
        "sessionId": sid,
        "sha256": _sha(image),
        "name": "cat.png",
        "type": "image/png",
        "size": len(image),
        "path": str(out),
    }
    code, refused = run_cli(
        root, "session", "attachment", sid, _sha(image), "--out", str(out), check=False
    )
    assert code == 1 and out.read_bytes() == image

    # An edit keeps the question's files and adds new ones; nothing is copied.
    (tmp_path / "more.txt").write_bytes(b"more text\n")
    turn = shown["turns"][0]["turnId"]
    _, edited = run_cli(
        root,
        "session",
        "edit",
        sid,
        "--turn",
        turn,
        "look again",
        "--quiet",
        "--attach",
        str(tmp_path / "more.txt"),
    )
    _, branch = run_cli(root, "session", "show", edited["childSessionId"])
    names = [a["name"] for a in branch["messages"][0]["attachments"]]
    assert names == ["cat.png", "notes.md", "more.txt"]
    blobs = [p for p in (root / "attachments" / "sha256").rglob("*") if p.is_file()]
    assert len(blobs) == 3


def test_a_refused_file_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (tmp_path / "cut.png").write_bytes(png_bytes()[:-12])
    _, made = run_cli(root, "session", "new")
    sid = made["sessionId"]
    code, _ = run_cli(
        root, "session", "say", sid, "look", "--attach", str(tmp_path / "cut.png"), check=False
    )
    assert code == 1
    _, shown = run_cli(root, "session", "show", sid)
    assert shown["messages"] == [] and shown["turns"] == []
    assert not (root / "attachments").exists()


def test_the_limits_come_from_the_settings(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, made = run_cli(root, "session", "new")
    (root / "settings.json").write_bytes(orjson.dumps({"format": 1, "attachmentFileMb": 1}))
    (tmp_path / "big.txt").write_bytes(b"a" * (1024 * 1024 + 1))
    proc = subprocess.run(
        [
            *cli_command(root),
            "session",
            "say",
            made["sessionId"],
            "x",
            "--attach",
            str(tmp_path / "big.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    error = orjson.loads(proc.stdout.strip().splitlines()[-1])["error"]
    assert proc.returncode == 1 and error["code"] == "attachment_too_large"
    assert error["megabytes"] == 1 and error["name"] == "big.txt"


@pytest.mark.parametrize(
    ("field", "value"),
    [("attachmentFileMb", 0), ("attachmentImages", "ten"), ("attachmentImageTurns", -1)],
)
def test_limits_that_make_no_sense_are_refused(field: str, value: object) -> None:
    with pytest.raises(InvalidSettings) as caught:
        validate_settings({field: value})
    assert caught.value.details["field"] == field
    assert validate_settings({"attachmentImageTurns": 2}).attachment_limits.image_turns == 2


def test_fanout_with_files_gives_every_branch_the_same_stored_files(tmp_path: Path) -> None:
    root = tmp_path / "root"
    image, notes = png_bytes(seed=7), b"# Plan\n"
    (tmp_path / "map.png").write_bytes(image)
    (tmp_path / "plan.md").write_bytes(notes)
    _, made = run_cli(root, "session", "new")
    sid = made["sessionId"]
    run_cli(root, "session", "say", sid, "hello", "--quiet")
    args = ["session", "fanout", sid, "compare these", "--model", "a", "--model", "b"]
    files = ["--attach", str(tmp_path / "map.png"), str(tmp_path / "plan.md")]
    _, fanned = run_cli(root, *args, "--quiet", "--operation-id", "op-files", *files)
    branches = [b["sessionId"] for b in fanned["branches"]]
    assert len(branches) == 2 and all(b["endReason"] == "completed" for b in fanned["branches"])
    expected = [
        {"name": "map.png", "type": "image/png", "size": len(image), "sha256": _sha(image)},
        {"name": "plan.md", "type": "text/markdown", "size": len(notes), "sha256": _sha(notes)},
    ]
    for branch in branches:
        _, shown = run_cli(root, "session", "show", branch)
        asked = [m for m in shown["messages"] if m["content"] == "compare these"]
        assert [m["attachments"] for m in asked] == [expected]
    stored = sorted(p.name for p in (root / "attachments" / "sha256").rglob("*") if p.is_file())
    assert stored == sorted([_sha(image), _sha(notes)])
    # The same operation id asked with other files is another fan-out, refused.
    code, refused = run_cli(
        root, *args, "--quiet", "--operation-id", "op-files", "--attach", files[1], check=False
    )
    assert (code, refused["error"]["code"]) == (1, "operation_conflict")
