"""A remote client sees the text a local replay shows, though partial answers are stored as deltas.

``session-events-v1`` keeps its meaning: every partial commit on the wire is
a whole-text ``message/assistant`` with ``partial: true``, so a client of any
version (the desktop's remote tab replays the commits into a projection)
shows the same answer as the server's own replay, from any ``after``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from helpers.providers import ScriptedProvider
from helpers.serve import serve_process
from helpers.sessions import commits_of

from branchwise.core.projection import events as ev
from branchwise.core.projection.projection import Projection
from branchwise.core.runtime import TurnRunner
from branchwise.core.store.store import SessionStore


def shown(projection: Projection) -> list[tuple[Any, ...]]:
    return [(m.message_id, m.role, m.content, m.partial) for m in projection.messages]


def test_events_on_the_wire_carry_whole_partial_texts_from_any_after(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root")
    writer = store.create("wire")
    session_id = writer.session_id
    chunks = ["Remote ", "", "clients ", "see 全部 ", "the 🙂 ", "text."]
    asyncio.run(TurnRunner(writer, ScriptedProvider(chunks), flush_interval=0).run("one"))
    writer.commit([ev.turn_start("open"), ev.user_message("u-open", "two")])
    writer.commit([ev.assistant_delta("still ", ("a-open", "m"))])
    for piece in ("stream", "ing…"):
        writer.commit([ev.assistant_delta(piece)])
    writer.close()  # the second answer stays open, as after a crash
    local = commits_of(store, session_id)
    assert any(e["type"] == "message/delta" for c in local for e in c)

    with serve_process(tmp_path / "root") as server:
        auth = {"Authorization": f"Bearer {server.token}"}
        with httpx.Client(base_url=server.url, headers=auth, timeout=30) as client:

            def wire(after: int) -> list[list[dict[str, Any]]]:
                params = {"after": after, "wait": 0}
                answer = client.get(f"/sessions/{session_id}/events", params=params)
                assert answer.status_code == 200, answer.text
                return answer.json()["commits"]  # type: ignore[no-any-return]

            everything = wire(0)
            ends = [int(c[-1]["seq"]) for c in local]
            assert [int(c[-1]["seq"]) for c in everything] == ends
            sent = [e for c in everything for e in c]
            assert not [e for e in sent if e["type"] == "message/delta"]
            # Each partial event holds what a local replay through its commit shows.
            for number, commit in enumerate(everything):
                through = Projection.replay(local[: number + 1])
                for event in commit:
                    if event["type"] == "message/assistant":
                        message = through.message(event["messageId"])
                        assert message is not None and event["content"] == message.content
            # A client that already holds the commits through any seq catches up to the same text.
            expected = shown(Projection.replay(local))
            for after in [0, *ends]:
                client_state = Projection.replay(c for c in everything if c[-1]["seq"] <= after)
                for commit in wire(after):
                    client_state.apply(commit)
                assert shown(client_state) == expected, after
    assert expected[-1][2:] == ("still streaming…", True)
