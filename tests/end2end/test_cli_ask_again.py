"""``session edit|regenerate|retry`` in real processes against a real OpenAI-compatible server."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import HELPERS_DIR
from helpers.cli import cli_command, run_cli

from branchwise.core.settings import Settings, save_settings

FAKE_SERVER = HELPERS_DIR / "fake_openai_server.py"
RESULT_KEYS = {"childSessionId", "turnId", "messageId", "boundarySequence", "endReason"}


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A well-behaved server (recording what it is asked) and one that answers 500."""
    log = tmp_path / "requests.jsonl"
    with (
        subprocess.Popen(
            [sys.executable, str(FAKE_SERVER), "--port", "0", "--record", str(log)],
            stdout=subprocess.PIPE,
            text=True,
        ) as good,
        subprocess.Popen(
            [sys.executable, str(FAKE_SERVER), "--port", "0", "--status", "500"],
            stdout=subprocess.PIPE,
            text=True,
        ) as bad,
    ):
        assert good.stdout is not None and bad.stdout is not None
        try:
            yield {
                "good": good.stdout.readline().strip(),
                "bad": bad.stdout.readline().strip(),
                "log": log,
            }
        finally:
            good.terminate()
            bad.terminate()


def _sent(log: Path) -> list[list[dict[str, str]]]:
    """The messages of every chat request the good server received, in order."""
    lines = log.read_bytes().splitlines() if log.exists() else []
    requests = [orjson.loads(line) for line in lines]
    return [r["json"]["messages"] for r in requests if r["path"].endswith("/chat/completions")]


def _run(root: Path, *args: str) -> tuple[int, Any, str]:
    proc = subprocess.run([*cli_command(root), *args], capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode, orjson.loads(lines[-1]), proc.stderr


def _sessions(root: Path) -> set[str]:
    return {p.name for p in (root / "sessions").iterdir() if not p.name.startswith(".")}


def test_edit_regenerate_and_retry_from_the_command_line(
    tmp_path: Path, servers: dict[str, Any]
) -> None:
    root = tmp_path / "root"
    run_cli(root, "session", "new")
    save_settings(root, Settings(provider="openai", base_url=servers["good"], model="fake-model"))
    good = ("--base-url", servers["good"], "--model", "fake-model")
    _, created = run_cli(root, "session", "new", "--title", "Trip")
    source = created["sessionId"]
    _, first = run_cli(root, "session", "say", source, "Where to?", "--quiet")
    _, second = run_cli(root, "session", "say", source, "And then?", "--quiet")
    _, parent_before = run_cli(root, "session", "show", source)

    # Edit turn 2: a branch at the end of turn 1 asking the edited prompt, streamed.
    code, edited, _ = _run(
        root, "session", "edit", source, "--turn", second["turnId"], "And after that?", *good
    )
    assert code == 0 and set(edited) == RESULT_KEYS and edited["endReason"] == "completed"
    assert _sent(servers["log"])[-1] == [
        {"role": "user", "content": "Where to?"},
        {"role": "assistant", "content": "Hello from the fake server."},
        {"role": "user", "content": "And after that?"},
    ]
    _, branch = run_cli(root, "session", "show", edited["childSessionId"])
    assert [m["content"] for m in branch["messages"]][2:] == [
        "And after that?",
        "Hello from the fake server.",
    ]
    assert branch["parent"]["turnId"] == first["turnId"]
    assert branch["parent"]["origin"] == {
        "kind": "edit",
        "turnId": second["turnId"],
        "prompt": "And after that?",
    }
    assert branch["turns"][-1]["turnId"] == edited["turnId"]
    assert branch["title"] == "Trip (branch 1)"  # named as a branch made in the app
    assert branch["turns"][-1]["boundarySequence"] == edited["boundarySequence"]
    _, parent_after = run_cli(root, "session", "show", source)
    # The parent is untouched; only its disk usage moved from own to shared (the branch
    # links its segment).
    assert parent_after.pop("disk")["sharedBytes"] == parent_before.pop("disk")["ownBytes"]
    assert parent_after == parent_before

    # Regenerate turn 1: a branch at the start re-asking the first prompt.
    code, regenerated, _ = _run(
        root, "session", "regenerate", source, "--turn", first["turnId"], "--quiet", *good
    )
    assert code == 0 and set(regenerated) == RESULT_KEYS
    assert _sent(servers["log"])[-1] == [{"role": "user", "content": "Where to?"}]
    _, tree = run_cli(root, "session", "tree", source)
    by_id = {s["sessionId"]: s for s in tree["sessions"]}
    assert by_id[regenerated["childSessionId"]]["parent"]["boundarySequence"] == 0
    assert by_id[regenerated["childSessionId"]]["parent"]["origin"]["kind"] == "regenerate"
    assert by_id[regenerated["childSessionId"]]["title"] == "Trip (branch 2)"

    # The server fails mid-edit: the branch keeps the edited prompt; the turn ends error.
    code, failed, stderr = _run(
        root, "session", "edit", source, "--turn", second["turnId"], "Try this",
        "--quiet", "--base-url", servers["bad"], "--model", "fake-model",
    )  # fmt: skip
    assert code == 1 and set(failed) == RESULT_KEYS and failed["endReason"] == "error"
    assert failed["messageId"] is None
    assert orjson.loads(stderr.strip().splitlines()[-1])["error"]["code"].startswith("provider_")
    broken = failed["childSessionId"]
    _, shown = run_cli(root, "session", "show", broken)
    assert shown["messages"][-1] == {
        "messageId": shown["messages"][-1]["messageId"],
        "role": "user",
        "content": "Try this",
    }

    # A later message there does not resend the failed prompt ...
    run_cli(root, "session", "say", broken, "Something else", "--quiet", *good)
    assert "Try this" not in str(_sent(servers["log"])[-1])
    # ... and retry runs it again as a new turn of the same branch.
    code, retried, _ = _run(root, "session", "retry", broken, "--quiet", *good)
    assert code == 0 and set(retried) == RESULT_KEYS
    assert retried["childSessionId"] is None and retried["endReason"] == "completed"
    assert _sent(servers["log"])[-1][-1] == {"role": "user", "content": "Try this"}
    _, shown = run_cli(root, "session", "show", broken)
    assert [t["endReason"] for t in shown["turns"]][-3:] == ["error", "completed", "completed"]
    assert shown["turns"][-1]["turnId"] == retried["turnId"]

    # Nothing failed any more.
    code, refused, _ = _run(root, "session", "retry", broken)
    assert code == 1 and refused["error"]["code"] == "turn_not_failed"


def test_refusals_print_typed_errors_and_write_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new")
    source = created["sessionId"]
    _, turn = run_cli(root, "session", "say", source, "hi", "--quiet")
    before = _sessions(root)
    cases = [
        (("edit", source, "--turn", "nope", "x"), "unknown_turn"),
        (("edit", source, "--turn", turn["turnId"], "   "), "empty_prompt"),
        (("regenerate", source, "--turn", "nope"), "unknown_turn"),
        (("regenerate", "0000000000-missing", "--turn", "t"), "source_not_found"),
        (("edit", "0000000000-missing", "--turn", "t", "x"), "source_not_found"),
        (("retry", "0000000000-missing"), "session_not_found"),
        (("retry", source), "turn_not_failed"),
        (("retry", source, "--turn", turn["turnId"]), "turn_not_failed"),
    ]
    for args, code in cases:
        status, answer, _ = _run(root, "session", *args)
        assert (status, answer["error"]["code"]) == (1, code), (args, answer)
    assert _sessions(root) == before
    assert not (root / "fork-index").exists() or not list((root / "fork-index").iterdir())


def test_an_edit_retried_with_its_operation_id_finishes_the_same_branch(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new")
    source = created["sessionId"]
    _, turn = run_cli(root, "session", "say", source, "hi", "--quiet")
    args = ("session", "edit", source, "--turn", turn["turnId"], "hello", "--operation-id", "op-e")
    _, first, _ = _run(root, *args, "--quiet")
    _, again, _ = _run(root, *args, "--quiet")
    assert again == first
    assert len(_sessions(root)) == 2
