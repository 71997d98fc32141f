"""``branchwise import`` as a user runs it: progress on stderr, the report last on stdout."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
from helpers.chatgpt_export import conversation, linear, message, write_zip
from helpers.cli import cli_command, run_cli


def test_import_prints_progress_then_the_report_and_imports_once(tmp_path: Path) -> None:
    edited = conversation(
        "c-edit",
        "Edited",
        [
            ("u1", None, message("user", "one", time=1)),
            ("a1", "u1", message("assistant", "uno", time=2, model="gpt-4o")),
            ("u2", "a1", message("user", "two", time=3)),
            ("a2", "u2", message("assistant", "dos", time=4)),
            ("u2e", "a1", message("user", "TWO", time=5)),
            ("a2e", "u2e", message("assistant", "DOS", time=6)),
        ],
        current="a2",
    )
    path = write_zip(tmp_path / "export.zip", [edited, linear("c-lin", 2)])
    root = tmp_path / "data"
    proc = subprocess.run(
        [*cli_command(root), "import", str(path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "Imported: 3 new of 3 conversations" in proc.stderr
    report = orjson.loads(proc.stdout.strip().splitlines()[-1])
    assert report["skipped"] == [] and report["warnings"] == []
    rows = [(c["kind"], c["source"]["id"], c["created"]) for c in report["conversations"]]
    assert rows == [("root", "c-edit", True), ("fork", "c-edit/a2e", True), ("root", "c-lin", True)]
    root_id, fork_id = (c["sessionId"] for c in report["conversations"][:2])
    fork_row = report["conversations"][1]
    assert fork_row["parentSessionId"] == root_id and fork_row["forkTurnId"]

    _, lineage = run_cli(root, "session", "lineage", fork_id)
    assert [s["sessionId"] for s in lineage["lineage"]] == [fork_id, root_id]
    _, shown = run_cli(root, "session", "show", fork_id)
    assert [m["content"] for m in shown["messages"]] == ["one", "uno", "TWO", "DOS"]
    assert shown["parent"]["turnId"] == fork_row["forkTurnId"]

    _, again = run_cli(root, "import", str(path), "--format", "chatgpt")
    assert [c["created"] for c in again["conversations"]] == [False, False, False]


def test_import_refusals_are_typed_errors(tmp_path: Path) -> None:
    bad = tmp_path / "conversations.json"
    bad.write_bytes(b'[{"mapping": ')
    code, error = run_cli(tmp_path / "data", "import", str(bad), "--format", "chatgpt", check=False)
    assert code == 1 and error["error"]["code"] == "malformed_import"
    code, error = run_cli(tmp_path / "data", "import", str(tmp_path / "none.json"), check=False)
    assert code == 1 and error["error"]["code"] == "import_not_found"
    code, _ = run_cli(tmp_path / "data", "import", str(bad), "--format", "nope", check=False)
    assert code == 2


def test_session_export_chatgpt_round_trips_through_import(tmp_path: Path) -> None:
    edited = conversation(
        "c-x",
        "Exported",
        [
            ("u1", None, message("user", "one", time=1)),
            ("a1", "u1", message("assistant", "uno", time=2)),
            ("a1b", "u1", message("assistant", "eins", time=3)),
        ],
        current="a1",
    )
    root = tmp_path / "data"
    _, report = run_cli(root, "import", str(write_zip(tmp_path / "e.zip", [edited])))
    fork_id = report["conversations"][1]["sessionId"]
    out = tmp_path / "conversations.json"
    _, written = run_cli(
        root, "session", "export", fork_id, "--format", "chatgpt", "--out", str(out)
    )
    assert written["format"] == "chatgpt"
    (exported,) = orjson.loads(out.read_bytes())
    assert exported["title"] == "Exported"
    _, again = run_cli(tmp_path / "other", "import", str(out))
    assert [(c["kind"], c["forkTurnId"]) for c in again["conversations"]] == [
        ("root", None),
        ("fork", None),
    ]


def test_a_folder_given_to_a_file_format_says_it_is_a_folder(tmp_path: Path) -> None:
    root = tmp_path / "root"
    folder = tmp_path / "export"
    folder.mkdir()
    for format in ("chatgpt", "open-webui", "librechat"):
        code, refused = run_cli(root, "import", str(folder), "--format", format, check=False)
        assert code == 2 and refused["error"]["code"] == "invalid_argument", refused
        assert f"{folder} is a folder; --format {format} reads" in refused["error"]["message"]
    (folder / "conversations.json").write_text("[]")
    _, refused = run_cli(root, "import", str(folder), "--format", "chatgpt", check=False)
    assert refused["error"]["message"].endswith(f"use {folder / 'conversations.json'}")
    assert not (root / "sessions").exists() or not any((root / "sessions").iterdir())
