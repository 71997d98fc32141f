"""``branchwise session compare A B`` prints exactly the issue's shape; unrelated ones refuse."""

from __future__ import annotations

from pathlib import Path

from helpers.cli import run_cli


def test_compare_prints_the_common_point_and_both_sides(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "Trip")
    sid = created["sessionId"]
    run_cli(root, "session", "say", sid, "Where to?", "--quiet")
    _, shown = run_cli(root, "session", "show", sid)
    first = shown["turns"][0]
    _, forked = run_cli(root, "session", "fork", sid, "--turn", first["turnId"])
    branch = forked["childSessionId"]
    run_cli(root, "session", "say", branch, "What about Kyoto?", "--quiet")
    run_cli(root, "session", "say", sid, "What about Osaka?", "--quiet")

    _, result = run_cli(root, "session", "compare", sid, branch)

    assert set(result) == {"common", "left", "right"}
    assert result["common"] == {
        "sessionId": sid,
        "turnId": first["turnId"],
        "boundarySequence": first["boundarySequence"],
    }
    assert set(result["left"]) == {"sessionId", "turns"}
    (left,) = result["left"]["turns"]
    (right,) = result["right"]["turns"]
    assert set(left) == {"turnId", "prompt", "answer"}
    assert (left["prompt"], right["prompt"]) == ("What about Osaka?", "What about Kyoto?")
    assert left["answer"] and right["answer"]


def test_conversations_of_different_trees_refuse_with_not_related(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, one = run_cli(root, "session", "new")
    _, two = run_cli(root, "session", "new")
    code, refused = run_cli(
        root, "session", "compare", one["sessionId"], two["sessionId"], check=False
    )
    assert code == 1 and refused["error"]["code"] == "not_related"
    code, refused = run_cli(root, "session", "compare", one["sessionId"], "../etc", check=False)
    assert code == 1 and refused["error"]["code"] == "invalid_session_id"
