"""``branchwise session merge``: the issue's JSON shape, each way of saying what comes back."""

from __future__ import annotations

from pathlib import Path

from helpers.cli import run_cli


def _family(root: Path) -> tuple[str, str, str]:
    _, created = run_cli(root, "session", "new", "--title", "Trip")
    parent = created["sessionId"]
    run_cli(root, "session", "say", parent, "Where to?", "--quiet")
    _, targets = run_cli(root, "session", "targets", parent)
    turn = targets["targets"][0]["turnId"]
    _, forked = run_cli(root, "session", "fork", parent, "--turn", turn)
    branch = forked["childSessionId"]
    _, said = run_cli(root, "session", "say", branch, "Compare Kyoto and Osaka", "--quiet")
    return parent, branch, said["turnId"]


def _inherited_turn(root: Path, branch: str) -> str:
    _, shown = run_cli(root, "session", "show", branch)
    return shown["turns"][0]["turnId"]  # "Where to?", held from the parent


def test_merge_an_answer_a_written_summary_and_a_generated_one(tmp_path: Path) -> None:
    root = tmp_path / "root"
    parent, branch, turn = _family(root)

    _, merged = run_cli(root, "session", "merge", branch, "--turn", turn, "--operation-id", "op-1")
    assert set(merged) == {"parentSessionId", "mergeSequence", "created"}
    assert merged["parentSessionId"] == parent and merged["created"] is True
    _, again = run_cli(root, "session", "merge", branch, "--turn", turn, "--operation-id", "op-1")
    assert again == {**merged, "created": False}

    _, written = run_cli(
        root, "session", "merge", branch, "--into", parent, "--summary", "Kyoto wins."
    )
    assert written["mergeSequence"] > merged["mergeSequence"]
    _, generated = run_cli(root, "session", "merge", branch, "--summary")
    assert generated["created"] is True

    _, shown = run_cli(root, "session", "show", parent)
    merges = [m for m in shown["messages"] if m["role"] == "merge"]
    assert [m["content"] for m in merges][1] == "Kyoto wins."
    assert merges[2]["content"].startswith("Summary of the branch (1 turn):")
    assert "Compare Kyoto and Osaka" in merges[2]["content"]
    _, branch_shown = run_cli(root, "session", "show", branch)
    assert not [m for m in branch_shown["messages"] if m["role"] == "merge"]


def test_refusals_name_their_reason_and_write_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    parent, branch, turn = _family(root)
    _, before = run_cli(root, "session", "show", parent)
    for args, code in (
        (("--into", branch, "--summary", "x"), "not_ancestor"),
        (("--summary", ""), "invalid_merge"),
        (("--turn", "no-such-turn"), "unknown_turn"),
        (("--summary", "x", "--operation-id", ""), "invalid_merge"),
        (("--turn", _inherited_turn(root, branch)), "not_own_turn"),
        (("--turn", turn, "--turn", _inherited_turn(root, branch)), "not_own_turn"),
    ):
        status, refused = run_cli(root, "session", "merge", branch, *args, check=False)
        assert status == 1 and refused["error"]["code"] == code, (args, refused)
    status, refused = run_cli(root, "session", "merge", parent, "--summary", "x", check=False)
    assert status == 1 and refused["error"]["code"] == "not_ancestor"
    _, after = run_cli(root, "session", "show", parent)
    assert after["messages"] == before["messages"]
