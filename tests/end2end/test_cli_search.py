"""``branchwise search`` end to end: real CLI processes, real logs, a real SQLite index."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from helpers.cli import cli_command, run_cli, wait_for_partial_text

from branchwise.core.projection import events as ev
from branchwise.core.search.index import INDEX_NAME
from branchwise.core.store.publish import replace_log
from branchwise.core.store.store import SessionStore

HIT_KEYS = {
    "sessionId",
    "title",
    "turnId",
    "messageId",
    "role",
    "snippet",
    "alsoIn",
    "writtenIn",
    "label",
    "labelParts",
    "forkTurnIndex",
    "alsoInBranches",
}


def search(root: Path, *args: str) -> list[dict]:
    """The user-message hits of ``branchwise search`` (the demo responder echoes the question)."""
    code, found = run_cli(root, "search", *args)
    assert code == 0 and len(found["hits"]) <= found["total"]
    return [hit for hit in found["hits"] if hit["role"] == "user"]


def test_say_then_search_english_and_chinese(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "Trip plans")
    session_id = created["sessionId"]
    _, said = run_cli(root, "session", "say", session_id, "我想去北京 and Taiwan 臺北", "--quiet")
    assert not (root / INDEX_NAME).exists()  # writing commands leave the index alone
    code, found = run_cli(root, "search", "北京")
    assert code == 0 and found["total"] == 2  # the question, and the demo answer quoting it
    assert {h["role"] for h in found["hits"]} == {"user", "assistant"}
    assert all(set(h) == HIT_KEYS for h in found["hits"])
    (hit,) = search(root, "北京")
    assert hit["sessionId"] == session_id and hit["role"] == "user"
    assert hit["turnId"] == said["turnId"] and hit["title"] == "Trip plans"
    assert hit["alsoIn"] == [] and "北京" in hit["snippet"]
    assert len(search(root, "臺")) == 1
    assert search(root, "台") == []  # Traditional is not Simplified
    assert len(search(root, "TAIW")) == 1
    _, titled = run_cli(root, "search", "trip")
    assert [h["role"] for h in titled["hits"]] == ["title"]
    assert run_cli(root, "search", "trip", "--session", session_id)[1]["total"] == 1


def test_operators_and_quotes_are_text_and_empty_queries_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "syntax")
    run_cli(root, "session", "say", created["sessionId"], 'x AND "y" NEAR(z) -w *v', "--quiet")
    for query in ['"y"', "AND", "NEAR(z)", "-w", "*v", '"', "NEAR(", "a OR", "^"]:
        # "--" ends the options, so a query may start with a dash
        code, answer = run_cli(root, "search", "--", query, check=False)
        assert code == 0 and "hits" in answer, (query, answer)
        assert query in ("NEAR(", "a OR", "^") or len(search(root, "--", query)) == 1, query
    code, refused = run_cli(root, "search", "   ", check=False)
    assert code == 1 and refused["error"]["code"] == "invalid_search"
    code, refused = run_cli(root, "search", "x", "--limit", "0", check=False)
    assert code == 1 and refused["error"]["code"] == "invalid_search"
    code, refused = run_cli(root, "search", "x", "--session", "../etc", check=False)
    assert code == 1 and refused["error"]["code"] == "invalid_session_id"


def test_a_message_inherited_by_ten_forks_is_one_hit(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "origin")
    source = created["sessionId"]
    _, said = run_cli(root, "session", "say", source, "the pangolin question", "--quiet")
    children = [
        run_cli(root, "session", "fork", source, "--turn", said["turnId"])[1]["childSessionId"]
        for _ in range(10)
    ]
    (hit,) = search(root, "pangolin")
    assert len(hit["alsoIn"]) == 10 and {hit["sessionId"], *hit["alsoIn"]} == {source, *children}
    (asked,) = search(root, "pangolin", "--session", source)
    assert asked["sessionId"] == source and set(asked["alsoIn"]) == set(children)


def test_commits_the_index_never_saw_deleted_and_corrupt_indexes(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "crash")
    session_id = created["sessionId"]
    run_cli(root, "session", "say", session_id, "first heron", "--quiet")
    # Commits written by the store alone, as if the process died before indexing them.
    store = SessionStore(root)
    with store.open_writer(session_id) as writer:
        writer.commit([ev.turn_start("t-x"), ev.user_message("msg_x", "second heron")])
        writer.commit([ev.turn_end("t-x", "completed")])
    _, found = run_cli(root, "search", "heron")
    assert len(search(root, "heron")) == 2
    os.unlink(root / INDEX_NAME)
    assert run_cli(root, "search", "heron")[1] == found
    (root / INDEX_NAME).write_bytes(os.urandom(64 * 1024))
    for suffix in ("-wal", "-shm"):
        (root / f"{INDEX_NAME}{suffix}").unlink(missing_ok=True)
    code, again = run_cli(root, "search", "heron", check=False)
    assert code == 0 and again == found
    assert any(p.name.startswith(f"{INDEX_NAME}.bad-") for p in root.iterdir())


def test_a_replaced_log_is_searched_as_it_is_now(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "rewind")
    session_id = created["sessionId"]
    run_cli(root, "session", "say", session_id, "an ibis to keep", "--quiet")
    run_cli(root, "session", "say", session_id, "a flamingo to drop", "--quiet")
    assert len(search(root, "flamingo")) == 1
    store = SessionStore(root)
    frames = store.read(session_id).scan.frames
    first_turn_end = next(
        n for n, f in enumerate(frames) if any(e["type"] == "turn/end" for e in f.events)
    )
    commits = [
        [{k: v for k, v in e.items() if k not in ("seq", "ts")} for e in frame.events]
        for frame in frames[: first_turn_end + 1]
    ]
    replace_log(store, session_id, commits)
    assert run_cli(root, "search", "flamingo")[1]["total"] == 0
    assert len(search(root, "ibis")) == 1


def test_child_and_fork_commands_index_what_they_wrote(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "parent")
    _, child = run_cli(root, "session", "child", created["sessionId"], "--title", "Side quest")
    _, found = run_cli(root, "search", "side quest")
    assert [h["sessionId"] for h in found["hits"]] == [child["childSessionId"]]


def test_a_say_killed_mid_answer_is_found_by_the_next_search(tmp_path: Path) -> None:
    """SIGKILL between commits: nothing indexed it, and the next search finds every commit."""
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "killed")
    session_id = created["sessionId"]
    run_cli(root, "session", "say", session_id, "the first okapi", "--quiet")
    assert len(search(root, "okapi")) == 1  # the index now exists and is current
    store = SessionStore(root)
    with subprocess.Popen(
        [*cli_command(root), "session", "say", session_id, "the second okapi", "--delay-ms", "40"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as proc:
        partial = wait_for_partial_text(store, session_id)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert {hit["snippet"] for hit in search(root, "okapi")} == {
        "the first okapi",
        "the second okapi",
    }
    word = max(partial.content.split(), key=len)
    _, found = run_cli(root, "search", "--", word)
    assert partial.message_id in {hit["messageId"] for hit in found["hits"]}


def test_a_query_starting_with_a_dash_is_a_query_not_an_option(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "flags")
    run_cli(root, "session", "say", created["sessionId"], "run it with -x and -verbose", "--quiet")
    assert len(search(root, "-x")) == 1
    assert len(search(root, "-verbose", "--limit", "5")) == 1
    assert len(search(root, "--limit", "5", "-x")) == 1
    code, refused = run_cli(root, "search", "-x", "-y", check=False)
    assert code == 2 and refused is None  # two dashed tokens: which is the query is not guessed
    code, refused = run_cli(root, "search", check=False)
    assert code == 2 and refused["error"]["code"] == "invalid_argument"
