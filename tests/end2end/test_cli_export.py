"""``branchwise session export`` in real processes: stdout, --out, --tree, and refusals."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
from helpers.cli import cli_command, run_cli
from helpers.sessions import log_file


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


def _damaged(root: Path) -> str:
    """A session of three turns whose second prompt's commit is damaged (good ones follow)."""
    _, created = run_cli(root, "session", "new", "--title", "Damaged")
    session_id = created["sessionId"]
    for prompt in ("First question", "Second question", "Third question"):
        run_cli(root, "session", "say", session_id, prompt, "--quiet")
    log = log_file(root / "sessions" / session_id)
    data = bytearray(log.read_bytes())
    at = data.index(b"Second question")
    data[at] ^= 0x20
    log.write_bytes(bytes(data))
    return session_id


def test_a_damaged_session_is_refused_or_exported_partial_and_marked(tmp_path: Path) -> None:
    root = tmp_path / "root"
    session_id = _damaged(root)
    out = tmp_path / "out.json"
    for extra in ([], ["--format", "json"], ["--tree"], ["--format", "chatgpt"]):
        code, refused = run_cli(root, "session", "export", session_id, *extra, check=False)
        assert code == 1 and refused["error"]["code"] == "corrupt_log", extra
        code, refused = run_cli(
            root, "session", "export", session_id, *extra, "--out", str(out), check=False
        )
        assert code == 1 and refused["error"]["code"] == "corrupt_log", extra
        assert not out.exists()
    code, refused = run_cli(
        root, "session", "export", session_id, "--format", "chatgpt", "--partial", check=False
    )
    assert code == 2 and refused["error"]["code"] == "invalid_argument"

    run_cli(
        root, "session", "export", session_id, "--format", "json", "--partial", "--out", str(out)
    )
    document = orjson.loads(out.read_bytes())
    assert document["complete"] is False
    assert document["corruption"]["code"] == "corrupt_log"
    assert [m["content"] for m in document["messages"] if m["role"] == "user"] == ["First question"]
    tree_out = tmp_path / "tree.json"
    run_cli(root, "session", "export", session_id, "--tree", "--partial", "--out", str(tree_out))
    tree = orjson.loads(tree_out.read_bytes())
    assert tree["complete"] is False and tree["sessions"][0]["complete"] is False

    shown = subprocess.run(
        [*cli_command(root), "session", "export", session_id, "--partial"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.splitlines()
    assert shown[0] == "# Damaged"
    assert shown[2].startswith("> **Incomplete export:")
    assert [line for line in shown if line.startswith("## ")] == ["## Turn 1"]


def test_a_whole_export_says_it_is_complete(tmp_path: Path) -> None:
    root = tmp_path / "root"
    parent, _ = _branched(root)
    out = tmp_path / "whole.json"
    run_cli(root, "session", "export", parent, "--format", "json", "--out", str(out))
    document = orjson.loads(out.read_bytes())
    assert document["complete"] is True and document["corruption"] is None
