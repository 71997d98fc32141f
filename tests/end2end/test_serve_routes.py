"""Every route of a real ``branchwise serve`` on 127.0.0.1: answers, refusals, restarts.

The server is a subprocess; requests are plain HTTP (httpx), so what is
checked is exactly what a remote desktop or script gets. Every refused
request is also checked to leave the data root byte for byte as it was.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from helpers.cli import cli_command, run_cli
from helpers.serve import Served, serve_process
from helpers.sessions import tree_hashes

from branchwise.core.errors import RemoteRefusal
from branchwise.core.remote.client import RemoteStore
from branchwise.core.remote.protocol import CAPABILITIES
from branchwise.core.store.store import SessionStore


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A data root with one two-turn session made by the real CLI."""
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "remote")
    for text in ("one", "two"):
        run_cli(root, "session", "say", created["sessionId"], text, "--quiet")
    return root


@pytest.fixture
def served(root: Path) -> Iterator[Served]:
    with serve_process(root, args=["--delay-ms", "20"]) as server:
        yield server


def _client(served: Served) -> httpx.Client:
    auth = {"Authorization": f"Bearer {served.token}"}
    return httpx.Client(base_url=served.url, headers=auth, timeout=60)


def _only_session(root: Path) -> str:
    return SessionStore(root).list_sessions()[0].session_id


def _turn_records(client: httpx.Client, session_id: str, text: str) -> list[dict]:
    with client.stream("POST", f"/sessions/{session_id}/turns", json={"text": text}) as reply:
        assert reply.status_code == 200, reply.read()
        assert reply.headers["content-type"] == "application/x-ndjson"
        return [orjson.loads(line) for line in reply.iter_lines() if line.strip()]


def test_capabilities_list_every_route(served: Served) -> None:
    with _client(served) as client:
        assert client.get("/capabilities").json() == {"capabilities": list(CAPABILITIES)}
    assert "session-fork-targets-v1" in CAPABILITIES and len(CAPABILITIES) == 21
    assert "session-fanout-v1" in CAPABILITIES
    assert "session-fanout-attachments-v1" in CAPABILITIES
    assert "models-v1" in CAPABILITIES


ROUTES = [
    ("GET", "/capabilities"),
    ("GET", "/sessions"),
    ("POST", "/sessions"),
    ("GET", "/sessions/{sid}"),
    ("GET", "/sessions/{sid}/events?after=0&wait=0"),
    ("POST", "/sessions/{sid}/turns"),
    ("POST", "/sessions/{sid}/stop"),
    ("GET", "/sessions/{sid}/fork-targets"),
    ("GET", "/sessions/{sid}/lineage"),
    ("GET", "/sessions/{sid}/tree"),
    ("GET", "/sessions/{sid}/map"),
    ("POST", "/fork-session"),
    ("POST", "/sessions/{sid}/title"),
    ("POST", "/sessions/{sid}/label"),
    ("POST", "/sessions/{sid}/trash"),
    ("POST", "/sessions/{sid}/restore"),
    ("GET", "/search?q=one"),
    ("POST", "/attachments?name=a.txt"),
    ("GET", "/attachments/" + "0" * 64),
    ("GET", "/models"),
    ("GET", "/no-such-route"),
]


def test_every_route_wants_the_token_and_learns_nothing_else(root: Path, served: Served) -> None:
    sid = _only_session(root)
    before = tree_hashes(root)
    for header in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": served.token}):
        for method, path in ROUTES:
            reply = httpx.request(
                method,
                served.url + path.format(sid=sid),
                headers={**header, "X-Expected-Session": sid},
                content=b'{"text": "hi", "title": "x"}',
                timeout=30,
            )
            assert reply.status_code == 401, (method, path)
            assert reply.json() == {
                "error": {"code": "unauthorized", "message": "a valid bearer token is required"}
            }
    assert tree_hashes(root) == before


def test_list_and_show_are_the_cli_answers(root: Path, served: Served) -> None:
    sid = _only_session(root)
    _, local_list = run_cli(root, "session", "list")
    _, local_show = run_cli(root, "session", "show", sid)
    with _client(served) as client:
        listed = client.get("/sessions").json()
        shown = client.get(f"/sessions/{sid}").json()
        last = client.get(f"/sessions/{sid}", params={"limit": 1}).json()
        first = client.get(f"/sessions/{sid}", params={"offset": 0, "limit": 1}).json()
    entry = listed["sessions"][0]
    assert entry.pop("running") is False
    assert entry.pop("updatedAt") >= entry["createdAt"]
    assert listed == local_list
    assert shown.pop("running") is False
    assert shown == local_show
    assert last["page"] == {"offset": 1, "limit": 1, "totalTurns": 2}
    assert [t["turnId"] for t in last["turns"]] == [local_show["turns"][1]["turnId"]]
    assert [m["content"] for m in last["messages"]][0] == "two"
    assert first["page"]["offset"] == 0
    assert [m["content"] for m in first["messages"]][0] == "one"


def test_new_session_turn_stream_events_and_stop(root: Path, served: Served) -> None:
    with _client(served) as client:
        created = client.post("/sessions", json={"title": "over http"})
        assert created.status_code == 201
        sid = created.json()["sessionId"]
        assert created.json()["title"] == "over http"
        records = _turn_records(client, sid, "hello server")
        assert records[0]["type"] == "started"
        text = "".join(r["chunk"] for r in records if r["type"] == "text")
        ended = records[-1]
        assert ended["type"] == "ended" and ended["result"]["endReason"] == "completed"
        assert ended["result"]["messageId"] == records[0]["messageId"]
        shown = client.get(f"/sessions/{sid}").json()
        assert shown["messages"][-1]["content"] == text
        assert shown["turns"][-1]["boundarySequence"] == ended["result"]["boundarySequence"]

        everything = client.get(f"/sessions/{sid}/events", params={"after": 0}).json()
        seqs = [e["seq"] for commit in everything["commits"] for e in commit]
        assert seqs == list(range(1, everything["lastSeq"] + 1))
        assert everything["commits"][-1][-1]["type"] == "turn/end"
        assert len(everything["commits"]) == len(SessionStore(root).read(sid).scan.frames)
        started = time.monotonic()
        quiet = client.get(
            f"/sessions/{sid}/events", params={"after": everything["lastSeq"], "wait": 1}
        ).json()
        assert quiet["commits"] == [] and time.monotonic() - started >= 0.9

        # A long-poll wakes for a turn another client starts; stop ends it as cancelled.
        with client.stream("POST", f"/sessions/{sid}/turns", json={"text": "x " * 50}) as reply:
            lines = reply.iter_lines()
            assert orjson.loads(next(lines))["type"] == "started"
            woke = client.get(
                f"/sessions/{sid}/events", params={"after": everything["lastSeq"], "wait": 30}
            ).json()
            assert woke["commits"][0][0]["type"] == "turn/start" and woke["running"] is True
            # Only the log's files change now (no lease, no title): the long-poll still wakes.
            later = client.get(
                f"/sessions/{sid}/events", params={"after": woke["lastSeq"], "wait": 30}
            ).json()
            assert later["commits"]  # woken by the commit: a 30 s wait that expired has none
            assert later["commits"][0][0]["seq"] == woke["lastSeq"] + 1
            assert client.get("/sessions").json()["sessions"][0]["running"] is True
            assert client.post(f"/sessions/{sid}/stop").json() == {"stopped": True}
            rest = [orjson.loads(line) for line in lines if line.strip()]
        assert rest[-1]["type"] == "ended"
        assert rest[-1]["result"]["endReason"] == "cancelled"
        assert client.post(f"/sessions/{sid}/stop").json() == {"stopped": False}


def test_a_second_turn_while_one_runs_is_refused(root: Path, served: Served) -> None:
    sid = _only_session(root)
    with (
        _client(served) as client,
        client.stream("POST", f"/sessions/{sid}/turns", json={"text": "x " * 50}) as reply,
    ):
        assert orjson.loads(next(reply.iter_lines()))["type"] == "started"
        second = client.post(f"/sessions/{sid}/turns", json={"text": "again"})
        assert (second.status_code, second.json()["error"]["code"]) == (409, "turn_running")
        client.post(f"/sessions/{sid}/stop")


def test_bad_input_is_refused_typed_and_changes_nothing(root: Path, served: Served) -> None:
    sid = _only_session(root)
    before = tree_hashes(root)
    fork_ok = {
        "sourceSessionId": sid,
        "turnId": "t",
        "boundarySequence": 5,
        "expectedGeneration": 1,
        "operationId": "op",
    }
    bad = [
        ("POST", "/sessions", b"{nope", 400, "invalid_request"),
        ("POST", "/sessions", b"[]", 400, "invalid_request"),
        ("POST", "/sessions", b'{"title": 5}', 400, "invalid_request"),
        ("POST", "/sessions", b'{"title": "a", "extra": 1}', 400, "invalid_request"),
        ("POST", f"/sessions/{sid}/turns", b"{nope", 400, "invalid_request"),
        ("POST", f"/sessions/{sid}/turns", b"{}", 400, "invalid_request"),
        ("POST", f"/sessions/{sid}/turns", b'{"text": 7}', 400, "invalid_request"),
        ("POST", f"/sessions/{sid}/turns", b'{"text": "  "}', 400, "invalid_request"),
        ("POST", f"/sessions/{sid}/turns", b"x" * (10 * 1024 * 1024), 413, "body_too_large"),
        ("POST", "/sessions", b"x" * (10 * 1024 * 1024), 413, "body_too_large"),
        ("POST", "/fork-session", b"x" * (10 * 1024 * 1024), 413, "body_too_large"),
        ("POST", "/fork-session", orjson.dumps({**fork_ok, "turnId": 3}), 400, "invalid_request"),
        ("POST", "/fork-session", orjson.dumps({"turnId": "t"}), 400, "invalid_request"),
        ("POST", "/fork-session", orjson.dumps({**fork_ok, "title": 5}), 400, "invalid_request"),
        ("POST", "/fork-session", orjson.dumps({**fork_ok, "title": " "}), 400, "invalid_request"),
        (
            "POST",
            "/fork-session",
            orjson.dumps({**fork_ok, "title": "t" * 1001}),
            400,
            "invalid_request",
        ),
        ("POST", "/fork-session", orjson.dumps({**fork_ok, "name": "x"}), 400, "invalid_request"),
        (
            "POST",
            "/fork-session",
            orjson.dumps({**fork_ok, "turnId": None}),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/fork-session",
            orjson.dumps({**fork_ok, "origin": {"kind": "edit", "turnId": "t", "prompt": " "}}),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/fork-session",
            orjson.dumps({**fork_ok, "origin": {"kind": "merge", "turnId": "t", "prompt": "p"}}),
            400,
            "invalid_request",
        ),
        ("POST", f"/sessions/{sid}/turns", b'{"answer": false}', 400, "invalid_request"),
        (
            "POST",
            f"/sessions/{sid}/turns",
            b'{"answer": true, "text": "x"}',
            400,
            "invalid_request",
        ),
        ("POST", f"/sessions/{sid}/turns", b'{"answer": true}', 404, "unknown_turn"),
        ("POST", "/sessions/..%2F..%2Fetc/turns", b'{"text": "hi"}', 400, "invalid_session_id"),
        ("POST", "/sessions/..%2F..%2Fetc/stop", b"", 400, "invalid_session_id"),
        ("GET", "/sessions/..%2F..%2Fetc", b"", 400, "invalid_session_id"),
        ("GET", "/sessions/..%2F..%2Fetc/events", b"", 400, "invalid_session_id"),
        ("GET", "/sessions/..%2F..%2Fetc/lineage", b"", 400, "invalid_session_id"),
        ("GET", "/sessions/..%2F..%2Fetc/tree", b"", 400, "invalid_session_id"),
        ("GET", "/sessions/abcdefgh-none", b"", 404, "session_not_found"),
        ("POST", "/sessions/abcdefgh-none/turns", b'{"text": "hi"}', 404, "session_not_found"),
        ("POST", "/sessions/abcdefgh-none/stop", b"", 404, "session_not_found"),
        ("GET", f"/sessions/{sid}?limit=ten", b"", 400, "invalid_request"),
        ("GET", f"/sessions/{sid}?limit=0", b"", 400, "invalid_request"),
        ("GET", f"/sessions/{sid}?limit=-1", b"", 400, "invalid_request"),
        ("GET", f"/sessions/{sid}?offset=1", b"", 400, "invalid_request"),
        ("GET", f"/sessions/{sid}?limit=99999999999999999999999", b"", 400, "invalid_request"),
        ("GET", f"/sessions/{sid}/events?after=x", b"", 400, "invalid_request"),
        ("GET", f"/sessions/{sid}/events?wait=600", b"", 400, "invalid_request"),
        ("GET", f"/sessions/{sid}?junk=1", b"", 400, "invalid_request"),
        ("GET", "/sessions/a/b/c/d", b"", 404, "not_found"),
        ("GET", "/etc/passwd", b"", 404, "not_found"),
        ("DELETE", "/sessions", b"", 405, "invalid_request"),
        ("POST", f"/sessions/{sid}/title", b"{nope", 400, "invalid_request"),
        ("POST", f"/sessions/{sid}/title", b"{}", 400, "invalid_request"),
        ("POST", f"/sessions/{sid}/title", b'{"title": 5}', 400, "invalid_request"),
        ("POST", f"/sessions/{sid}/title", b'{"title": "a", "x": 1}', 400, "invalid_request"),
        ("POST", f"/sessions/{sid}/title", b'{"title": "   "}', 400, "invalid_title"),
        (
            "POST",
            f"/sessions/{sid}/title",
            orjson.dumps({"title": "t" * 201}),
            400,
            "invalid_title",
        ),
        ("POST", f"/sessions/{sid}/title", b"x" * (10 * 1024 * 1024), 413, "body_too_large"),
        ("POST", "/sessions/..%2F..%2Fetc/title", b'{"title": "x"}', 400, "invalid_session_id"),
        ("POST", "/sessions/abcdefgh-none/title", b'{"title": "x"}', 404, "session_not_found"),
        ("POST", "/sessions/..%2F..%2Fetc/trash", b"", 400, "invalid_session_id"),
        ("POST", "/sessions/abcdefgh-none/trash", b"", 404, "session_not_found"),
        ("POST", f"/sessions/{sid}/trash", b"{nope", 400, "invalid_request"),
        ("POST", f"/sessions/{sid}/trash?x=1", b"", 400, "invalid_request"),
        ("POST", f"/sessions/{sid}/restore", b"", 409, "not_trashed"),
        ("POST", "/sessions/abcdefgh-none/restore", b"", 404, "session_not_found"),
        ("GET", "/search", b"", 400, "invalid_request"),
        ("GET", "/search?q=", b"", 400, "invalid_request"),
        ("GET", "/search?q=a&q=b", b"", 400, "invalid_request"),
        ("GET", "/search?q=" + "a" * 1001, b"", 400, "invalid_request"),
        ("GET", "/search?q=one&limit=0", b"", 400, "invalid_request"),
        ("GET", "/search?q=one&limit=1001", b"", 400, "invalid_request"),
        ("GET", "/search?q=one&limit=x", b"", 400, "invalid_request"),
        ("GET", "/search?q=one&session=x", b"", 400, "invalid_request"),
    ]
    with _client(served) as client:
        for method, path, body, status, code in bad:
            reply = client.request(method, path, content=body)
            assert (reply.status_code, reply.json()["error"]["code"]) == (status, code), path
            assert reply.json()["error"]["message"]
    assert tree_hashes(root) == before


@contextmanager
def _mid_turn(root: Path, sid: str) -> Iterator[tuple[Served, dict[str, Any], Iterator[str]]]:
    """A server streaming a long turn of ``sid``, after its first text.

    Yields the server, the turn's ``started`` line and the rest of the stream.
    """
    with (
        serve_process(root, args=["--delay-ms", "50"]) as served,
        _client(served) as client,
        client.stream("POST", f"/sessions/{sid}/turns", json={"text": "long"}) as reply,
    ):
        lines = reply.iter_lines()
        started = orjson.loads(next(lines))
        assert started["type"] == "started"
        assert orjson.loads(next(lines))["type"] == "text"
        yield served, started, lines


def test_a_server_killed_mid_turn_closes_the_turn_interrupted_on_restart(root: Path) -> None:
    sid = _only_session(root)
    with _mid_turn(root, sid) as (served, started, lines):
        os.kill(served.pid, signal.SIGKILL)
        with pytest.raises(httpx.HTTPError):
            list(lines)
    left = SessionStore(root).read(sid).projection
    assert left.open_turn is not None and left.open_turn.turn_id == started["turnId"]
    with serve_process(root) as again, _client(again) as client:
        shown = client.get(f"/sessions/{sid}").json()
    assert shown["running"] is False
    assert shown["turns"][-1]["turnId"] == started["turnId"]
    assert shown["turns"][-1]["endReason"] == "interrupted"
    assert orjson.loads((root / "serve-turns.json").read_bytes()) == []


def test_sigterm_stops_the_server_gracefully_and_ends_a_running_turn(root: Path) -> None:
    """A service manager's SIGTERM: the running turn ends ``cancelled`` now, not on restart."""
    sid = _only_session(root)
    with _mid_turn(root, sid) as (served, started, _):
        served.process.send_signal(signal.SIGTERM)
        assert served.process.wait(timeout=30) == 0
        assert served.process.stdout is not None
        assert orjson.loads(served.process.stdout.read().splitlines()[-1]) == {"stopped": True}
    ended = SessionStore(root).read(sid).projection.turn(started["turnId"])
    assert ended is not None and ended.end_reason == "cancelled"
    assert orjson.loads((root / "serve-turns.json").read_bytes()) == []


def test_binding_beyond_loopback_warns(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*cli_command(tmp_path / "root"), "serve", "--host", "0.0.0.0", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        ready = orjson.loads(proc.stdout.readline())
        assert ready["url"].startswith("http://0.0.0.0:")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    warning = proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert warning.startswith("warning: serving on 0.0.0.0")
    assert "SSH tunnel" in warning
    token = (tmp_path / "root" / "serve-token").read_text().strip()
    assert token not in warning


async def _refusal_of_turn(remote: RemoteStore, session_id: str) -> RemoteRefusal:
    try:
        async for _record in remote.send_turn(session_id, "hello?"):
            pass
    except RemoteRefusal as exc:
        return exc
    raise AssertionError("the turn was not refused")


def test_a_conversation_written_elsewhere_is_a_retryable_409(root: Path, served: Served) -> None:
    sid = _only_session(root)
    with SessionStore(root).open_writer(sid):  # this process writes it: the server cannot
        before = tree_hashes(root)
        with _client(served) as client:
            reply = client.post(f"/sessions/{sid}/turns", json={"text": "hello?"})
        assert reply.status_code == 409
        assert reply.json()["error"]["code"] == "lease_held"
        refusal = asyncio.run(_refusal_of_turn(RemoteStore(served.url, served.token), sid))
        assert (refusal.code, refusal.details["status"]) == ("lease_held", 409)
        assert not refusal.definitive  # "busy": the client may retry
        assert tree_hashes(root) == before
    # Retrying once the other writer is done succeeds (the refusal was not definitive).
    with _client(served) as client:
        records = _turn_records(client, sid, "hello?")
    assert records[-1]["type"] == "ended"


def test_rename_trash_restore_and_search(root: Path, served: Served) -> None:
    sid = _only_session(root)
    store = SessionStore(root)
    with _client(served) as client:
        renamed = client.post(f"/sessions/{sid}/title", json={"title": "  Lab\n notes "})
        assert renamed.status_code == 200
        assert renamed.json() == {"sessionId": sid, "title": "Lab notes"}
        assert store.manifest(sid).title == "Lab notes"

        found = client.get("/search", params={"q": "two"}).json()
        _, local = run_cli(root, "search", "two")
        assert [{k: v for k, v in h.items() if k != "spans"} for h in found["hits"]] == local[
            "hits"
        ]
        assert found["total"] == local["total"]
        assert all(h["spans"] for h in found["hits"])
        assert client.get("/search", params={"q": "Lab"}).json()["hits"][0]["role"] == "title"

        trashed = client.post(f"/sessions/{sid}/trash")
        assert (trashed.status_code, trashed.json()) == (200, {"trashed": [sid]})
        assert not store.exists(sid)
        assert client.get("/sessions").json()["sessions"] == []
        assert client.get("/search", params={"q": "two"}).json() == {"hits": [], "total": 0}
        again = client.post(f"/sessions/{sid}/trash")
        assert (again.status_code, again.json()["error"]["code"]) == (409, "session_trashed")

        restored = client.post(f"/sessions/{sid}/restore")
        assert (restored.status_code, restored.json()) == (200, {"restored": [sid]})
        assert store.manifest(sid).title == "Lab notes"


def test_a_running_turn_keeps_its_conversation_from_rename_and_trash(
    root: Path, served: Served
) -> None:
    sid = _only_session(root)
    with (
        _client(served) as client,
        client.stream("POST", f"/sessions/{sid}/turns", json={"text": "x " * 50}) as reply,
    ):
        assert orjson.loads(next(reply.iter_lines()))["type"] == "started"
        renamed = client.post(f"/sessions/{sid}/title", json={"title": "later"})
        assert (renamed.status_code, renamed.json()["error"]["code"]) == (409, "lease_held")
        trashed = client.post(f"/sessions/{sid}/trash")
        assert (trashed.status_code, trashed.json()["error"]["code"]) == (409, "turn_running")
        client.post(f"/sessions/{sid}/stop")
    assert SessionStore(root).manifest(sid).title == "remote"


def test_a_fork_may_name_its_child(root: Path, served: Served) -> None:
    sid = _only_session(root)
    with _client(served) as client:
        target = client.get(
            f"/sessions/{sid}/fork-targets", headers={"X-Expected-Session": sid}
        ).json()["targets"][0]
        body = {
            "sourceSessionId": sid,
            "turnId": target["turnId"],
            "boundarySequence": target["boundarySequence"],
            "expectedGeneration": 1,
        }
        named = client.post(
            "/fork-session", json={**body, "operationId": "op-named", "title": "remote (branch 1)"}
        ).json()
        plain = client.post("/fork-session", json={**body, "operationId": "op-plain"}).json()
        # A retry under the same operation id gets the same child, named as it was.
        again = client.post(
            "/fork-session", json={**body, "operationId": "op-named", "title": "something else"}
        ).json()
    store = SessionStore(root)
    assert store.manifest(named["childSessionId"]).title == "remote (branch 1)"
    assert store.read(named["childSessionId"]).projection.title == "remote (branch 1)"
    assert store.manifest(plain["childSessionId"]).title == "remote"
    assert again == {"childSessionId": named["childSessionId"], "created": False}
    assert store.manifest(named["childSessionId"]).title == "remote (branch 1)"


def test_a_served_fork_is_labelled_and_its_label_renamed(root: Path, served: Served) -> None:
    sid = _only_session(root)
    with _client(served) as client:
        target = client.get(
            f"/sessions/{sid}/fork-targets", headers={"X-Expected-Session": sid}
        ).json()["targets"][1]
        body = {
            "sourceSessionId": sid,
            "turnId": target["turnId"],
            "boundarySequence": target["boundarySequence"],
            "expectedGeneration": 1,
            "operationId": "op-labelled",
        }
        child = client.post("/fork-session", json=body).json()["childSessionId"]
        listed = {s["sessionId"]: s for s in client.get("/sessions").json()["sessions"]}
        assert (listed[child]["label"], listed[child]["forkTurnIndex"]) == ("From turn 2", 2)
        assert listed[child]["labelParts"] == {"kind": "fork"}
        assert listed[sid]["label"] is None
        shown = client.get(f"/sessions/{child}").json()
        assert (shown["label"], shown["forkTurnIndex"]) == ("From turn 2", 2)
        renamed = client.post(f"/sessions/{child}/label", json={"label": " the  short one "})
        assert renamed.status_code == 200, renamed.text
        assert renamed.json() == {
            "sessionId": child,
            "title": "remote",
            "label": "the short one",
            "labelParts": {"kind": "given", "text": "the short one"},
            "forkTurnIndex": 2,
        }
        refused = client.post(f"/sessions/{child}/label", json={"label": "  "})
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_label"
        unknown = client.post(f"/sessions/{child}/label", json={"label": "x", "title": "y"})
        assert unknown.status_code == 400
        lineage = client.get(f"/sessions/{child}/lineage").json()["lineage"]
        assert [entry["label"] for entry in lineage] == ["the short one", None]
    assert SessionStore(root).manifest(child).label is not None


def test_an_edit_branches_with_its_prompt_and_the_server_answers_it(
    root: Path, served: Served
) -> None:
    sid = _only_session(root)
    store = SessionStore(root)
    turns = store.read(sid).projection.turns
    first, second = turns[0], turns[1]
    body = {
        "sourceSessionId": sid,
        "turnId": first.turn_id,
        "boundarySequence": first.boundary_sequence,
        "expectedGeneration": 1,
        "operationId": "op-edit",
        "origin": {"kind": "edit", "turnId": second.turn_id, "prompt": "two, in French"},
    }
    at_start = {
        **body,
        "turnId": None,
        "boundarySequence": 0,
        "operationId": "op-regenerate",
        "origin": {"kind": "regenerate", "turnId": first.turn_id, "prompt": "one"},
    }
    with _client(served) as client:
        edited = client.post("/fork-session", json=body).json()["childSessionId"]
        regenerated = client.post("/fork-session", json=at_start).json()["childSessionId"]
        # The same operation with another prompt is another request: refused, nothing made.
        other = {**body, "origin": {**body["origin"], "prompt": "something else"}}
        refused = client.post("/fork-session", json=other)
        assert refused.status_code == 409, refused.text
        for child in (edited, regenerated):
            with client.stream("POST", f"/sessions/{child}/turns", json={"answer": True}) as reply:
                assert reply.status_code == 200, reply.read()
                records = [orjson.loads(line) for line in reply.iter_lines() if line.strip()]
            assert records[-1]["type"] == "ended", records
            assert records[-1]["result"]["endReason"] == "completed"
        # Answered once: nothing waits for an answer any more.
        again = client.post(f"/sessions/{edited}/turns", json={"answer": True})
        assert again.status_code == 404 and again.json()["error"]["code"] == "unknown_turn"
    child = store.read(edited).projection
    assert [child.message(t.user_message_id or "").content for t in child.turns] == [
        "one",
        "two, in French",
    ]
    assert all(not turn.is_open for turn in child.turns)
    manifest = store.manifest(edited)
    assert manifest.parent is not None and manifest.parent.origin is not None
    assert manifest.parent.origin.prompt == "two, in French"
    start = store.read(regenerated).projection
    assert len(start.turns) == 1 and start.turns[0].end_reason == "completed"


def test_map_is_the_cli_answer(root: Path, served: Served) -> None:
    sid = _only_session(root)
    _, local = run_cli(root, "session", "map", sid)
    with _client(served) as client:
        assert client.get(f"/sessions/{sid}/map").json() == local
        missing = client.get("/sessions/01a2505c-0000-7000-8000-000000000000/map")
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "session_not_found"
    assert [n["turnIndex"] for n in local["nodes"]] == [1, 2] and local["edges"] == []
