"""``branchwise session targets|fork|child|lineage|tree`` end to end, in real processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.cli import run_cli


def _session_with_two_turns(root: Path) -> str:
    _, created = run_cli(root, "session", "new", "--title", "Trip")
    session_id = created["sessionId"]
    run_cli(root, "session", "say", session_id, "Where to?", "--quiet")
    run_cli(root, "session", "say", session_id, "And then?", "--quiet")
    return session_id


def test_targets_fork_child_lineage_tree(tmp_path: Path) -> None:
    root = tmp_path / "root"
    source = _session_with_two_turns(root)

    _, targets = run_cli(root, "session", "targets", source)
    assert targets["source"] == {"sessionId": source, "generation": 1}
    assert targets["verifiable"] is True
    first, second = targets["targets"]
    assert set(first) == {"turnId", "messageId", "boundarySequence", "available", "reason"}
    assert first["available"] and second["available"]

    _, forked = run_cli(
        root, "session", "fork", source, "--turn", first["turnId"], "--operation-id", "op-cli"
    )
    assert forked == {
        "childSessionId": forked["childSessionId"],
        "created": True,
        "operationId": "op-cli",
    }
    _, again = run_cli(
        root,
        "session",
        "fork",
        source,
        "--turn",
        first["turnId"],
        "--boundary",
        str(first["boundarySequence"]),
        "--generation",
        "1",
        "--operation-id",
        "op-cli",
    )
    assert again == {**forked, "created": False}
    _, generated = run_cli(
        root,
        "session",
        "fork",
        source,
        "--turn",
        second["turnId"],
        "--child-id",
        "0000000000-cli-fork",
    )
    assert generated["childSessionId"] == "0000000000-cli-fork"
    assert generated["operationId"]  # the CLI made one

    fork_id = forked["childSessionId"]
    _, shown = run_cli(root, "session", "show", fork_id)
    assert len(shown["turns"]) == 1 and shown["usage"] == {
        "inputTokens": 0,
        "outputTokens": 0,
        "estimated": False,
    }

    _, child = run_cli(
        root, "session", "child", fork_id, "--title", "Helper", "--turn", first["turnId"]
    )
    assert child["parentSessionId"] == fork_id and child["rootSessionId"] == source
    assert child["spawnedFrom"] == {"turnId": first["turnId"]}

    _, walked = run_cli(root, "session", "lineage", child["childSessionId"])
    assert [e["sessionId"] for e in walked["lineage"]] == [child["childSessionId"], fork_id, source]
    assert walked["rootSessionId"] == source and walked["complete"] is True

    _, family = run_cli(root, "session", "tree", source)
    assert family["rootSessionId"] == source
    by_id = {s["sessionId"]: s for s in family["sessions"]}
    assert set(by_id) == {source, fork_id, "0000000000-cli-fork", child["childSessionId"]}
    assert by_id[child["childSessionId"]]["depth"] == 2
    assert by_id[fork_id]["childSessionIds"] == [child["childSessionId"]]


def test_refusals_exit_non_zero_with_a_typed_error(tmp_path: Path) -> None:
    root = tmp_path / "root"
    source = _session_with_two_turns(root)
    code, unknown = run_cli(root, "session", "fork", source, "--turn", "no-such-turn", check=False)
    assert code == 1 and unknown["error"]["code"] == "unknown_turn"
    _, targets = run_cli(root, "session", "targets", source)
    turn = targets["targets"][0]
    code, stale = run_cli(
        root, "session", "fork", source, "--turn", turn["turnId"], "--generation", "7", check=False
    )
    assert code == 1 and stale["error"]["code"] == "stale_source"
    code, missing = run_cli(root, "session", "targets", "0000000000-nothing", check=False)
    assert code == 1 and missing["error"]["code"] == "source_not_found"
    code, lost = run_cli(root, "session", "lineage", "0000000000-nothing", check=False)
    assert code == 1 and lost["error"]["code"] == "session_not_found"
    _, listed = run_cli(root, "session", "list")
    assert [s["sessionId"] for s in listed["sessions"]] == [source]  # refusals made nothing


def test_a_fork_is_named_with_title_and_an_empty_one_refuses(tmp_path: Path) -> None:
    root = tmp_path / "root"
    source = _session_with_two_turns(root)
    turn = run_cli(root, "session", "targets", source)[1]["targets"][0]["turnId"]

    def title_of(forked: dict[str, Any]) -> str:
        return str(run_cli(root, "session", "show", forked["childSessionId"])[1]["title"])

    _, plain = run_cli(root, "session", "fork", source, "--turn", turn)  # named as in the app
    assert title_of(plain) == "Trip (branch 1)"

    before = sorted(p.name for p in (root / "sessions").iterdir())
    code, refused = run_cli(
        root, "session", "fork", source, "--turn", turn, "--title", "  ", check=False
    )
    assert code != 0 and refused["error"]["code"] == "invalid_title"
    assert sorted(p.name for p in (root / "sessions").iterdir()) == before
    _, named = run_cli(root, "session", "fork", source, "--turn", turn, "--title", " Plan  B ")
    assert title_of(named) == "Plan B"
    _, third = run_cli(root, "--lang", "zh_Hans", "session", "fork", source, "--turn", turn)
    assert title_of(third) == "Trip（分支 3）"
    # A retry keeps the name its first call gave, though a fork landed since.
    retried = ("session", "fork", source, "--turn", turn, "--operation-id", "op-kept")
    _, first = run_cli(root, *retried)
    run_cli(root, "session", "fork", source, "--turn", turn)
    _, again = run_cli(root, *retried)
    assert again == {**first, "created": False}
    assert title_of(first) == "Trip (branch 4)"
    # A missing source is refused by the fork, in its words, whatever the defaults.
    gone = ("session", "fork", "01a240e0-98a2-7000-acce-cb34badd1000", "--turn", turn)
    for given in ((), ("--boundary", "3", "--generation", "0")):
        code, refused = run_cli(root, *gone, *given, check=False)
        assert code == 1 and refused["error"]["code"] == "source_not_found", given
