"""``branchwise session export`` in real processes: stdout, --out, --tree, and refusals."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
from helpers.cli import cli_command, run_cli


def _branched(root: Path) -> tuple[str, str]:
    _, created = run_cli(root, "session", "new", "--title", "Recipes")
    parent = created["sessionId"]
    run_cli(root, "session", "say", parent, "First question", "--quiet")
    run_cli(root, "session", "say", parent, "Second question", "--quiet")
    _, targets = run_cli(root, "session", "targets", parent)
    turn = targets["targets"][1]["turnId"]
    _, forked = run_cli(root, "session", "fork", parent, "--turn", turn)
    child = forked["childSessionId"]
    run_cli(root, "session", "say", child, "Branch question", "--quiet")
    return parent, child


def test_markdown_to_stdout_and_json_to_a_file(tmp_path: Path) -> None:
    root = tmp_path / "root"
    parent, child = _branched(root)

    shown = subprocess.run(
        [*cli_command(root), "session", "export", child],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    lines = shown.splitlines()
    assert lines[0] == "# Recipes (branch 1)"
    assert "*Branched from Recipes, turn 2*" in lines
    assert [line for line in lines if line.startswith("## ")] == [
        "## Turn 1",
        "## Turn 2",
        "## Turn 3",
    ]
    assert "Branch question" in shown

    out = tmp_path / "export.json"
    status, answer = run_cli(
        root, "session", "export", child, "--format", "json", "--out", str(out)
    )
    assert status == 0
    assert answer == {"exported": str(out), "format": "json", "bytes": out.stat().st_size}
    document = orjson.loads(out.read_bytes())
    assert document["schema"] == "branchwise.export/1"
    assert document["lineage"]["parent"]["sessionId"] == parent
    assert [m["content"] for m in document["messages"] if m["role"] == "user"] == [
        "First question",
        "Second question",
        "Branch question",
    ]
    assert document["usage"]["outputTokens"] > 0

    status, refused = run_cli(root, "session", "export", child, "--out", str(out), check=False)
    assert status == 1 and refused["error"]["code"] == "output_exists"
    assert orjson.loads(out.read_bytes()) == document  # untouched
    run_cli(root, "session", "export", child, "--out", str(out), "--overwrite")
    assert out.read_text().startswith("# Recipes (branch 1)\n")


def test_tree_export_and_refusals(tmp_path: Path) -> None:
    root = tmp_path / "root"
    parent, child = _branched(root)

    tree_file = tmp_path / "tree.json"
    run_cli(root, "session", "export", parent, "--tree", "--out", str(tree_file))
    document = orjson.loads(tree_file.read_bytes())
    assert document["schema"] == "branchwise.export-tree/1"
    assert [s["session"]["sessionId"] for s in document["sessions"]] == [parent, child]

    status, answer = run_cli(
        root, "session", "export", parent, "--tree", "--format", "markdown", check=False
    )
    assert status == 2 and answer["error"]["code"] == "invalid_argument"
    status, answer = run_cli(root, "session", "export", "nosuchsession", check=False)
    assert status == 1 and answer["error"]["code"] == "session_not_found"
    missing = tmp_path / "no" / "such" / "dir.md"
    status, answer = run_cli(root, "session", "export", parent, "--out", str(missing), check=False)
    assert status == 1 and answer["error"]["code"] == "export_failed"
    assert not missing.parent.exists()
