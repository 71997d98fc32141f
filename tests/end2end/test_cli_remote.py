"""``branchwise --server URL session …`` prints what the local command prints.

Two identical data roots: commands run locally on one and through a real
``branchwise serve`` on the other, and the JSON is compared with generated
ids (turns, messages, operations, new sessions) replaced by placeholders.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.cli import cli_command, run_cli
from helpers.serve import Served, serve_process

ID = re.compile(r"(?:(?:turn|msg|op|step)_)?[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}")


def _remote(
    served: Served, *args: str, token_file: Path | None = None, env: dict | None = None
) -> subprocess.CompletedProcess[str]:
    options = ["--server", served.url]
    if token_file is not None:
        options += ["--token-file", str(token_file)]
    return subprocess.run(
        [*cli_command(Path("/nonexistent-remote-root")), *options, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def _last_json(proc: subprocess.CompletedProcess[str]) -> Any:
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    return orjson.loads(lines[-1])


def _ids_replaced(value: Any, names: dict[str, str]) -> Any:
    """``value`` with every generated id replaced by ``<id N>`` in order of appearance."""

    def name(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0), f"<id {len(names)}>")

    text = ID.sub(name, orjson.dumps(value).decode())
    return orjson.loads(text)


TIMED = frozenset(
    {
        "createdAt",
        "ts",
        "ownBytes",
        "sharedBytes",
        "firstTokenMs",
        "generationMs",
        "tokensPerSecond",
    }
)
"""Times differ (a turn's speed and time to first token too), and so do byte counts of logs
holding them."""


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: 0 if k in TIMED else _untimed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _comparable(value: Any) -> Any:
    if isinstance(value, dict) and "disk" in value:
        # Disk usage is of files, not of the conversation: the twin roots' files differ in
        # which ones another session links (a fork made on one side shares a segment).
        value = {k: v for k, v in value.items() if k != "disk"}
    text = orjson.dumps(_untimed(value)).decode()
    return _ids_replaced(orjson.loads(text), {})


@pytest.fixture
def twins(tmp_path: Path) -> tuple[Path, Path, str]:
    """Two identical roots holding one two-turn session and a fork of it."""
    local = tmp_path / "local"
    _, created = run_cli(local, "session", "new", "--title", "twins")
    sid = created["sessionId"]
    for text in ("one", "two"):
        run_cli(local, "session", "say", sid, text, "--quiet")
    _, targets = run_cli(local, "session", "targets", sid)
    run_cli(local, "session", "fork", sid, "--turn", targets["targets"][0]["turnId"])
    remote = tmp_path / "remote"
    shutil.copytree(local, remote, symlinks=True)
    return local, remote, sid


def test_every_remote_command_prints_the_local_json(
    twins: tuple[Path, Path, str], tmp_path: Path
) -> None:
    local, remote_root, sid = twins
    with serve_process(remote_root) as served:
        token_file = tmp_path / "token"
        token_file.write_text(served.token + "\n")

        def both(*args: str) -> tuple[Any, Any]:
            code, mine = run_cli(local, *args)
            theirs = _remote(served, *args, token_file=token_file)
            assert theirs.returncode == code, theirs.stdout + theirs.stderr
            answers = (mine, _last_json(theirs))
            # Disk usage counts cache files (sidecars, their timing-dependent flushes)
            # of each process's copy; everything the conversation holds must be equal.
            for answer in answers:
                if isinstance(answer, dict):
                    answer.pop("disk", None)
            return answers

        for args in (
            ("session", "list"),
            ("session", "show", sid),
            ("session", "targets", sid),
            ("session", "lineage", sid),
            ("session", "tree", sid),
        ):
            mine, theirs = both(*args)
            assert theirs == mine, args  # the same root's copy: ids are equal too

        mine, theirs = both("session", "say", sid, "three")
        assert _comparable(theirs) == _comparable(mine)
        mine, theirs = both("session", "show", sid)
        assert _comparable(theirs) == _comparable(mine)  # the same turn, committed the same
        streamed = _remote(served, "session", "say", sid, "four", token_file=token_file)
        assert len(streamed.stdout.splitlines()) > 1  # the answer streamed before the result

        _, turn_targets = run_cli(local, "session", "targets", sid)
        turn = turn_targets["targets"][1]["turnId"]
        mine, theirs = both("session", "fork", sid, "--turn", turn, "--operation-id", "op-same")
        assert _comparable(theirs) == _comparable(mine) and theirs["created"] is True
        again = _last_json(
            _remote(
                served,
                *("session", "fork", sid, "--turn", turn, "--operation-id", "op-same"),
                token_file=token_file,
            )
        )
        assert again == {**theirs, "created": False}
        # Unnamed, the branch is named after its source on both sides, as in the app.
        shown = _remote(served, "session", "show", theirs["childSessionId"], token_file=token_file)
        assert _last_json(shown)["title"] == "twins (branch 2)"
        _, shown_here = run_cli(local, "session", "show", mine["childSessionId"])
        assert shown_here["title"] == "twins (branch 2)"
        titled = ("--operation-id", "op-titled", "--title", "Plan B")
        mine, theirs = both("session", "fork", sid, "--turn", turn, *titled)
        shown = _remote(served, "session", "show", theirs["childSessionId"], token_file=token_file)
        assert _last_json(shown)["title"] == "Plan B"
        _, shown_here = run_cli(local, "session", "show", mine["childSessionId"])
        assert shown_here["title"] == "Plan B"

        mine, theirs = both("session", "new", "--title", "fresh")
        assert _comparable(theirs) == _comparable(mine)
        fresh = _remote(served, "session", "show", theirs["sessionId"], token_file=token_file)
        assert _last_json(fresh)["title"] == "fresh"
        _, mine = run_cli(local, "session", "show", sid)
        theirs = _last_json(_remote(served, "session", "show", sid, token_file=token_file))
        assert len(theirs["turns"]) == len(mine["turns"]) + 1  # "four" ran remotely only


def test_remote_refusals_print_the_local_error(
    twins: tuple[Path, Path, str], tmp_path: Path
) -> None:
    local, remote_root, sid = twins
    with serve_process(remote_root) as served:
        env = {"BRANCHWISE_TOKEN": served.token}
        for args in (
            ("session", "show", "abcdefgh-none"),
            ("session", "targets", "abcdefgh-none"),
            ("session", "fork", sid, "--turn", "turn_nope"),
        ):
            code, mine = run_cli(local, *args, check=False)
            theirs = _remote(served, *args, env=env)
            assert (theirs.returncode, _last_json(theirs)) == (code, mine), args
            assert code == 1

        wrong = _remote(served, "session", "list", env={"BRANCHWISE_TOKEN": "wrong"})
        assert wrong.returncode == 1
        assert _last_json(wrong)["error"]["code"] == "unauthorized"
        usage = [
            _remote(served, "session", "list", env={"BRANCHWISE_TOKEN": ""}),
            _remote(served, "session", "verify", sid, env=env),
            _remote(served, "session", "say", sid, "hi", "--model", "m", env=env),
            _remote(
                served, "session", "fork", sid, "--turn", "t", "--child-id", "abcd1234", env=env
            ),
        ]
        for proc in usage:
            assert proc.returncode == 2, proc.stdout
            assert _last_json(proc)["error"]["code"] == "invalid_argument"
    bad_url = subprocess.run(
        [*cli_command(tmp_path / "x"), "--server", "ftp://host", "session", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BRANCHWISE_TOKEN": "t"},
    )
    assert bad_url.returncode == 2
    assert _last_json(bad_url)["error"]["code"] == "invalid_server_url"
    assert not (tmp_path / "x").exists()  # --server never touches a local data root


def test_an_unreachable_server_is_remote_unavailable(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.run(
        [*cli_command(tmp_path / "x"), "--server", f"http://127.0.0.1:{port}"]
        + ["session", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BRANCHWISE_TOKEN": "t"},
    )
    assert proc.returncode == 1
    assert _last_json(proc)["error"]["code"] == "remote_unavailable"


def test_a_token_file_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "token-fifo"
    os.mkfifo(fifo)
    folder = tmp_path / "token-folder"
    folder.mkdir()
    for path in (fifo, folder, Path("/dev/zero")):
        proc = subprocess.run(
            [*cli_command(tmp_path / "x"), "--server", "http://127.0.0.1:9"]
            + ["--token-file", str(path), "session", "list"],
            capture_output=True,
            text=True,
            timeout=30,  # a FIFO with no writer used to block the read forever
        )
        assert proc.returncode == 2, (path, proc.stdout, proc.stderr)
        error = _last_json(proc)["error"]
        assert error["code"] == "invalid_argument" and error["argument"] == "--token-file"
        assert "not a regular file" in error["message"]
