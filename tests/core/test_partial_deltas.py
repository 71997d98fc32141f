"""Partial answers stored once: the runner writes deltas, and every reader shows the whole text.

The runner, a SIGKILLed ``session say``, search (across catch-ups and
rebuilds), export, compare and fork all read the same logs a streaming answer
left: deltas, then (unless a crash cut the turn) the whole answer.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.cli import cli_command
from helpers.forking import fork_at
from helpers.providers import ScriptedProvider
from helpers.recording import Recorder
from helpers.sessions import commits_of, prefix_projection

from branchwise.core.conversation.compare import compare
from branchwise.core.conversation.export.json import export_document
from branchwise.core.log.snapshots import wait_for_snapshots
from branchwise.core.projection import events as ev
from branchwise.core.providers.demo import demo_answer
from branchwise.core.runtime import TurnResult, TurnRunner
from branchwise.core.search.index import INDEX_NAME, SearchIndex
from branchwise.core.store.store import SessionStore, SessionWriter

DELTA = "message/delta"
CHUNKS = ["Branch", "", "ing 北", "京的春", "", "天 🙂", "👩\u200d👩", "\u200d👧 e", "\u0301nd."]


def stream(writer: SessionWriter, chunks: list[str], question: str = "q") -> TurnResult:
    """One turn answered by ``chunks``, every chunk committed at once (flush interval 0)."""
    runner = TurnRunner(writer, ScriptedProvider(chunks), flush_interval=0)
    return asyncio.run(runner.run(question))


def deltas_of(store: SessionStore, session_id: str, message_id: str) -> list[str]:
    """The deltas stored for one answer: its opening one and those continuing it."""
    pieces, current = [], None
    for commit in commits_of(store, session_id):
        for e in commit:
            if e["type"] in ("turn/start", "turn/end", "message/assistant"):
                current = e.get("messageId")
            elif e["type"] == DELTA:
                current = e.get("messageId", current)
                if current == message_id:
                    pieces.append(e["delta"])
    return pieces


def test_each_partial_commit_stores_only_the_new_text(store: SessionStore) -> None:
    recorder = Recorder()
    with store.create("once") as writer:
        runner = TurnRunner(writer, ScriptedProvider(CHUNKS), recorder, flush_interval=0)
        result = asyncio.run(runner.run("q"))
    answer = "".join(CHUNKS)
    assert result.text == answer and result.end_reason == "completed"
    partials = [c for c in recorder.commits if c[0]["type"] in (DELTA, "message/assistant")]
    # Empty chunks are never committed; each other chunk is one delta of exactly its text.
    assert [c[0]["delta"] for c in partials[:-1]] == [c for c in CHUNKS if c]
    assert partials[-1][0] == {**partials[-1][0], "type": "message/assistant", "content": answer}
    assert "partial" not in partials[-1][0]
    snapshot = store.read(result.session_id)
    message = snapshot.projection.message(result.message_id or "")
    assert message is not None and message.content == answer and not message.partial


def test_a_say_killed_mid_answer_reopens_with_exactly_its_committed_deltas(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    store = SessionStore(root)
    with store.create("killed") as writer:
        session_id = writer.session_id
    prompt = "tell me a long story"
    cli = cli_command(root)
    with subprocess.Popen(
        [*cli, "session", "say", session_id, prompt, "--delay-ms", "60"], stdout=subprocess.PIPE
    ) as proc:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            frames = store.read(session_id).scan.frames
            if sum(1 for f in frames for e in f.events if e["type"] == DELTA) >= 2:
                break
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    events = [e for commit in commits_of(store, session_id) for e in commit]
    assert not [e for e in events if e["type"] == "message/assistant"]  # no whole text stored
    message_id = next(e["messageId"] for e in events if e["type"] == DELTA)
    assert all("ts" not in e for e in events if e["type"] == DELTA)
    committed = "".join(deltas_of(store, session_id, message_id))
    answer = demo_answer([{"role": "user", "content": prompt}])
    assert committed and answer.startswith(committed) and committed != answer

    reopened = store.open_writer(session_id)
    kept = reopened.projection.message(message_id)
    turn = reopened.projection.turns[0]
    reopened.close()
    assert turn.end_reason == "interrupted" and turn.message_id == message_id
    assert kept is not None and kept.content == committed and not kept.partial
    shown = subprocess.run([*cli, "session", "show", session_id], capture_output=True, check=True)
    assert orjson.loads(shown.stdout)["messages"][1]["content"] == committed

    # Every word of the kept answer is only in deltas; search finds one from the last of them.
    last = deltas_of(store, session_id, message_id)[-1]
    word = max(re.findall(r"[A-Za-z]{4,}", committed[-len(last) - 30 :]), key=len)
    found = subprocess.run([*cli, "search", word], capture_output=True, check=True)
    hits = orjson.loads(found.stdout)["hits"]
    assert any(hit["messageId"] == message_id for hit in hits), (word, hits)


def indexed_text(root: Path, message_id: str) -> str:
    """What the search index holds for a message (read from its SQLite file)."""
    with sqlite3.connect(root / INDEX_NAME) as conn:
        row = conn.execute("SELECT content FROM messages WHERE message_id = ?", (message_id,))
        return str(row.fetchone()[0])


def hits(index: SearchIndex, query: str) -> set[str]:
    return {hit.message_id for hit in index.search(query).hits}


def test_search_indexes_deltas_across_catch_ups_rebuilds_and_an_interrupted_turn(
    store: SessionStore,
) -> None:
    writer = store.create("search")
    session_id = writer.session_id
    writer.commit([ev.turn_start("t"), ev.user_message("u", "question")])
    writer.commit([ev.assistant_delta("The quick bro", ("a", "m"))])
    with SearchIndex(store.root) as index:
        index.catch_up_all(store)
        assert hits(index, "quick") == {"a"} and hits(index, "brown") == set()
        writer.commit([ev.assistant_delta("")])
        writer.commit([ev.assistant_delta("wn 狐狸 jumps")])
        index.catch_up_all(store)
        assert hits(index, "brown") == {"a"}  # a word split between two catch-ups
        assert hits(index, "狐狸") == {"a"} and hits(index, "jumps") == {"a"}
    writer.close()  # the turn is still open on disk: a crash's state
    assert indexed_text(store.root, "a") == "The quick brown 狐狸 jumps"

    (store.root / INDEX_NAME).unlink()  # rebuilt from scratch: the text is not doubled
    with SearchIndex(store.root) as index:
        index.catch_up_all(store)
        assert hits(index, "jumps") == {"a"}
    assert indexed_text(store.root, "a") == "The quick brown 狐狸 jumps"

    store.open_writer(session_id).close()  # closes the turn as interrupted
    with SearchIndex(store.root) as index:
        index.catch_up_all(store)
        assert hits(index, "brown") == {"a"}
    assert indexed_text(store.root, "a") == "The quick brown 狐狸 jumps"


def test_search_of_a_streamed_and_finished_answer_holds_the_final_text(
    store: SessionStore,
) -> None:
    with store.create("done") as writer:
        result = stream(writer, CHUNKS)
    with SearchIndex(store.root) as index:
        index.catch_up_all(store)
        assert result.message_id in hits(index, "北京的春天")
    assert indexed_text(store.root, result.message_id or "") == "".join(CHUNKS)


def test_export_compare_and_fork_show_the_whole_streamed_text(store: SessionStore) -> None:
    first = ["Streamed ", "answer ", "one, 长", "文本。"]
    with store.create("parent") as writer:
        one = stream(writer, first, "first question")
        parent_id = writer.session_id
    child = fork_at(store, parent_id, one.turn_id, "op-deltas").child_session_id
    second = ["The ", "branch's ", "own 🙂 ", "answer."]
    with store.open_writer(child) as writer:
        two = stream(writer, second, "second question")
    with store.open_writer(parent_id) as writer:
        three = stream(writer, ["Parent ", "goes ", "on."], "third question")

    document = export_document(store, child)
    contents = [m["content"] for m in document["messages"]]
    assert contents == ["first question", "".join(first), "second question", "".join(second)]
    assert not any(m["partial"] for m in document["messages"])

    comparison = compare(store, parent_id, child).to_json()
    assert [t["answer"] for t in comparison["left"]["turns"]] == [three.text]
    assert [t["answer"] for t in comparison["right"]["turns"]] == [two.text]
    assert comparison["common"]["turnId"] == one.turn_id


def test_a_fork_after_a_streamed_turn_equals_the_parent_and_inherits_no_open_deltas(
    store: SessionStore,
) -> None:
    writer = store.create("parent")
    parent_id = writer.session_id
    done = stream(writer, CHUNKS, "first")
    # A second answer is streaming (its deltas are durable) when the user branches at turn 1.
    writer.commit([ev.turn_start("open"), ev.user_message("u-open", "second")])
    writer.commit([ev.assistant_delta("half of the ", ("a-open", "m"))])
    writer.commit([ev.assistant_delta("second answer")])
    child = fork_at(store, parent_id, done.turn_id, "op-open").child_session_id
    writer.commit([ev.assistant_delta(" and more")])
    writer.close()

    boundary = done.boundary_sequence
    expected = prefix_projection(store, parent_id, boundary)
    got = store.read(child).projection

    def shown(messages: list[Any]) -> list[tuple[Any, ...]]:
        return [(m.message_id, m.role, m.content, m.turn_id, m.partial) for m in messages]

    assert shown(got.messages) == shown(expected.messages)
    assert [t.to_json() for t in got.turns] == [t.to_json() for t in expected.turns]
    inherited = [e for c in commits_of(store, child) for e in c if e["seq"] <= boundary]
    parent_prefix = [e for c in commits_of(store, parent_id) for e in c if e["seq"] <= boundary]
    assert inherited == parent_prefix  # verbatim, deltas of the finished turn included
    assert not [e for c in commits_of(store, child) for e in c if e.get("messageId") == "a-open"]
    parent = store.read(parent_id).projection.message("a-open")
    assert parent is not None and parent.content == "half of the second answer and more"


@pytest.mark.parametrize("chunks", [["x"], ["", "", "y", ""], ["中", "🙂", "\u0301"]])
def test_tiny_and_empty_chunkings_store_the_same_answer(
    store: SessionStore, chunks: list[str]
) -> None:
    with store.create("tiny") as writer:
        result = stream(writer, chunks)
    assert "".join(deltas_of(store, result.session_id, result.message_id or "")) == result.text
    assert store.read(result.session_id).projection.messages[-1].content == "".join(chunks)


def test_a_snapshot_taken_inside_a_streaming_answer_resumes_its_deltas(tmp_path: Path) -> None:
    """The projection snapshot may cover half an answer; the deltas after it continue it."""
    store = SessionStore(tmp_path, roll_bytes=400, snapshot_bytes=0)
    writer = store.create("snap")
    session_id = writer.session_id
    writer.commit([ev.turn_start("t"), ev.user_message("u", "question")])
    pieces = ["第一段 ", *[f"piece {n} 🙂 " for n in range(40)]]
    writer.commit([ev.assistant_delta(pieces[0], ("a", "m"))])
    for piece in pieces[1:20]:
        writer.commit([ev.assistant_delta(piece)])
    writer.close()  # the answer is open on disk; the next open writes a snapshot inside it
    with store.open_writer(session_id, continue_turn="t") as writer:
        for piece in pieces[20:]:
            writer.commit([ev.assistant_delta(piece)])
        live = writer.projection.message("a")
    wait_for_snapshots()
    quick = store.read(session_id, every_frame=False)
    full = store.read(session_id)
    assert quick.scan.resumed is not None  # the snapshot was used
    expected = "".join(pieces)
    assert live is not None and live.content == expected
    for projection in (quick.projection, full.projection):
        message = projection.message("a")
        assert message is not None and message.content == expected and message.partial
