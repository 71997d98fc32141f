"""The events route answers from a replay it keeps, byte for byte what a full replay answers.

``branchwise serve`` keeps each polled log's wire replay between requests
(:class:`~branchwise.core.projection.remote_view.WireLogs`) and reads only
the commits after ``after``. Here every ``after`` of a session with streamed
answers (one still streaming across two polls), a merge and a fork is asked
of a real server, before and after the log grows, and each answer's bytes
are set against the full replay's (the route's code before it kept a replay,
``helpers/wire_reference.py``);
so are the ``lastTurns`` pages, and a replay that let its old deltas' forms
go (it replays the log whole for an ``after`` before them).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import httpx
import orjson
from helpers.providers import ScriptedProvider
from helpers.serve import serve_process
from helpers.wire_reference import replayed_whole

from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.projection import events as ev
from branchwise.core.projection.remote_view import WireLogs, commits_after
from branchwise.core.remote.client import RemoteStore
from branchwise.core.remote.protocol import CAP_EVENTS_LAST_TURNS
from branchwise.core.runtime import TurnRunner
from branchwise.core.store.store import SessionStore


def _streamed(store: SessionStore) -> tuple[str, str]:
    """A root with streamed answers, a merge and an open streaming turn; a fork of it."""
    writer = store.create("kept")
    session_id = writer.session_id
    for prompt in ("one", "two"):
        chunks = ["Kept ", "", "replays ", "answer 全部 ", "the 🙂 ", "same."]
        asyncio.run(TurnRunner(writer, ScriptedProvider(chunks), flush_interval=0).run(prompt))
    writer.commit(
        [
            ev.session_merge(
                child_session_id="b" * 8,
                child_boundary_sequence=3,
                operation_id="op-merge",
                content="brought back",
                kind="note",
            )
        ]
    )
    asyncio.run(
        TurnRunner(writer, ScriptedProvider(["three ", "answers"]), flush_interval=0).run("3")
    )
    writer.close()
    turn = store.read(session_id).projection.turns[1]
    assert turn.boundary_sequence is not None
    request = ForkRequest(session_id, turn.turn_id, turn.boundary_sequence, 1)
    child = fork(store, request, "op-kept").child_session_id
    with store.open_writer(child) as fork_writer:
        fork_writer.commit([ev.turn_start("f"), ev.user_message("fu", "in the fork")])
        fork_writer.commit([ev.assistant_delta("forked ", ("fa", "m"))])
        fork_writer.commit([ev.assistant_delta("answer")])
    return session_id, child


def _expected(store: SessionStore, session_id: str, after: int, running: bool = False) -> bytes:
    frames = store.read(session_id).scan.frames
    last = frames[-1].events[-1]["seq"]
    return orjson.dumps(
        {"commits": replayed_whole(frames, after), "lastSeq": last, "running": running}
    )


def _every_after_matches(client: httpx.Client, store: SessionStore, session_id: str) -> int:
    last = store.read(session_id).scan.last_seq
    for after in range(last + 2):
        reply = client.get(f"/sessions/{session_id}/events", params={"after": after, "wait": 0})
        assert reply.status_code == 200, reply.text
        assert reply.content == _expected(store, session_id, after), after
    return last


def test_every_after_answers_the_full_replays_bytes_as_the_log_grows(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root")
    root, child = _streamed(store)
    with serve_process(tmp_path / "root") as server:
        auth = {"Authorization": f"Bearer {server.token}"}
        with httpx.Client(base_url=server.url, headers=auth, timeout=30) as client:
            for session_id in (root, child):
                _every_after_matches(client, store, session_id)
            # The fork's answer goes on streaming, then a new turn: the kept replay catches up.
            with store.open_writer(child, continue_turn="f") as writer:
                writer.commit([ev.assistant_delta(" grows")])
                writer.commit([ev.assistant_message("fa", "forked answer grows", "m")])
                writer.commit([ev.turn_end("f", ev.EndReason.COMPLETED)])
                writer.commit([ev.turn_start("g"), ev.user_message("gu", "again")])
                writer.commit([ev.assistant_delta("and ", ("ga", "m")), ev.usage(1, 2, "m")])
                writer.commit([ev.assistant_delta("again")])
                # a whole text replaces what the deltas built; deltas go on from it
                writer.commit([ev.assistant_message("ga", "replaced whole", "m", partial=True)])
                writer.commit([ev.step_start("gs"), ev.assistant_delta(" then more")])
            assert _every_after_matches(client, store, child) > 0


def test_last_turns_answer_the_commits_after_where_those_turns_start(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root")
    root, _child = _streamed(store)
    turns = store.read(root).projection.turns
    with serve_process(tmp_path / "root") as server:
        auth = {"Authorization": f"Bearer {server.token}"}
        with httpx.Client(base_url=server.url, headers=auth, timeout=30) as client:
            advertised = client.get("/capabilities").json()["capabilities"]
            assert CAP_EVENTS_LAST_TURNS in advertised
            for count in range(1, len(turns) + 2):
                reply = client.get(f"/sessions/{root}/events", params={"lastTurns": count})
                assert reply.status_code == 200, reply.text
                page: dict[str, Any] = reply.json()
                after = turns[-count].start_seq - 1 if count < len(turns) else 0
                assert page["after"] == after
                whole = orjson.loads(_expected(store, root, after))
                assert {k: page[k] for k in whole} == whole
            # The client's call: the last page, then a poll from its lastSeq finds nothing new.
            remote = RemoteStore(server.url, server.token)
            last_page = asyncio.run(remote.last_turns_events(root, 2))
            assert last_page["after"] == turns[-2].start_seq - 1
            assert (
                last_page["commits"]
                == orjson.loads(_expected(store, root, last_page["after"]))["commits"]
            )
            polled = asyncio.run(remote.events(root, last_page["lastSeq"], wait=0))
            assert polled["commits"] == []
            mixed = client.get(f"/sessions/{root}/events", params={"lastTurns": 1, "after": 3})
            none = client.get(f"/sessions/{root}/events", params={"lastTurns": 0})
    assert (mixed.status_code, mixed.json()["error"]["code"]) == (400, "invalid_request")
    assert (none.status_code, none.json()["error"]["code"]) == (400, "invalid_request")


def test_a_replay_that_let_old_deltas_go_answers_by_a_full_replay(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root")
    root, child = _streamed(store)
    kept = WireLogs(keep_delta_commits=2)
    for session_id in (root, child):
        directory = store.session_dir(session_id)
        manifest = store.manifest(session_id)
        frames = store.read(session_id).scan.frames
        for after in range(frames[-1].events[-1]["seq"] + 1):
            answer = kept.answer(directory, manifest, manifest.generation, after=after)
            assert answer.commits == replayed_whole(frames, after) == commits_after(frames, after)


def test_a_log_replaced_or_migrated_is_replayed_again(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root")
    kept = WireLogs()

    def answer(session_id: str, after: int) -> list[list[dict[str, Any]]]:
        manifest = store.manifest(session_id)
        directory = store.session_dir(session_id)
        return kept.answer(directory, manifest, manifest.generation, after=after).commits

    with store.create("first", session_id="a" * 8 + "-0000-4000-8000-" + "0" * 12) as writer:
        session_id = writer.session_id
        writer.commit([ev.turn_start("t"), ev.user_message("u", "first life")])
        writer.commit([ev.assistant_delta("long first answer", ("m", "x"))])
    assert answer(session_id, 0)[-1][0]["content"] == "long first answer"
    # The same id, another log of other bytes (deleted and made again): nothing kept is used.
    shutil.rmtree(store.session_dir(session_id))
    with store.create("second", session_id=session_id) as writer:
        writer.commit([ev.turn_start("t"), ev.user_message("u", "second")])
        writer.commit([ev.assistant_delta("short", ("m", "x"))])
        writer.commit([ev.assistant_delta(" reply")])
    frames = store.read(session_id).scan.frames
    for after in range(frames[-1].events[-1]["seq"] + 1):
        assert answer(session_id, after) == replayed_whole(frames, after), after
    store.migrate(session_id)
    frames = store.read(session_id).scan.frames
    for after in range(frames[-1].events[-1]["seq"] + 1):
        assert answer(session_id, after) == replayed_whole(frames, after), after
