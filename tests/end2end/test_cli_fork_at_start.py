"""``branchwise session fork ID --at-start`` in a real process."""

from __future__ import annotations

from pathlib import Path

from helpers.cli import run_cli


def test_fork_at_start_prints_the_fork_shape_and_is_idempotent(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "Trip")
    source = created["sessionId"]
    run_cli(root, "session", "say", source, "Where to?", "--quiet")
    _, forked = run_cli(root, "session", "fork", source, "--at-start", "--operation-id", "op-s")
    assert forked == {
        "childSessionId": forked["childSessionId"],
        "created": True,
        "operationId": "op-s",
    }
    _, again = run_cli(root, "session", "fork", source, "--at-start", "--operation-id", "op-s")
    assert again == {**forked, "created": False}
    _, shown = run_cli(root, "session", "show", forked["childSessionId"])
    assert shown["turns"] == [] and shown["messages"] == []
    assert shown["parent"]["turnId"] is None and shown["parent"]["boundarySequence"] == 0
    _, lineage = run_cli(root, "session", "lineage", forked["childSessionId"])
    assert source in str(lineage)
    _, tree = run_cli(root, "session", "tree", source)
    assert forked["childSessionId"] in str(tree)


def test_fork_needs_a_turn_or_at_start_but_not_both(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new")
    code, _ = run_cli(root, "session", "fork", created["sessionId"], check=False)
    assert code == 2
    code, _ = run_cli(
        root, "session", "fork", created["sessionId"], "--at-start", "--turn", "t", check=False
    )
    assert code == 2
    code, missing = run_cli(
        root, "session", "fork", "0000000000-missing", "--at-start", check=False
    )
    assert code == 1 and missing["error"]["code"] == "source_not_found"
