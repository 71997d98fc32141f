"""Replay of committed events into transcript, turns, boundaries and usage."""

from __future__ import annotations

import pytest
from helpers.sessions import log_file
from hypothesis import given
from hypothesis import strategies as st

from branchwise.core.errors import InvalidEvent
from branchwise.core.projection import events as ev
from branchwise.core.projection.projection import Projection
from branchwise.core.store.store import SessionStore


def test_turn_boundary_is_the_last_seq_of_the_closing_commit(store: SessionStore) -> None:
    with store.create("p") as writer:
        writer.commit([ev.turn_start("t1"), ev.user_message("u1", "hi")])
        writer.commit([ev.assistant_message("a1", "part", "demo", partial=True)])
        closing = writer.commit(
            [
                ev.assistant_message("a1", "hello", "demo"),
                ev.turn_end("t1", "completed"),
                ev.usage(3, 4, "demo"),
            ]
        )
        turn = writer.projection.turns[0]
    assert turn.boundary_sequence == closing[-1]["seq"] != closing[1]["seq"]
    assert turn.message_id == "a1" and turn.user_message_id == "u1"
    assert turn.end_reason == "completed"
    snapshot = store.read(writer.session_id)
    assert snapshot.projection.turns[0].boundary_sequence == turn.boundary_sequence
    assert [m.content for m in snapshot.projection.messages] == ["hi", "hello"]
    assert (snapshot.projection.input_tokens, snapshot.projection.output_tokens) == (3, 4)


def test_partial_text_is_shown_until_superseded(store: SessionStore) -> None:
    with store.create("p") as writer:
        writer.commit([ev.turn_start("t1"), ev.user_message("u1", "hi")])
        writer.commit([ev.assistant_message("a1", "par", "demo", partial=True)])
        message = writer.projection.message("a1")
        assert message is not None and message.partial and message.content == "par"
        writer.commit([ev.assistant_message("a1", "partial text", "demo", partial=True)])
        assert writer.projection.message("a1").content == "partial text"  # type: ignore[union-attr]
        assert len(writer.projection.messages) == 2


def test_open_turn_is_closed_as_interrupted_on_reopen(store: SessionStore) -> None:
    writer = store.create("crash")
    writer.commit([ev.turn_start("t1"), ev.user_message("u1", "hi")])
    writer.commit([ev.assistant_message("a1", "half an ans", "demo", partial=True)])
    writer.close()  # as if the process died here: the turn is still open on disk
    assert store.read(writer.session_id).projection.open_turn is not None
    reopened = store.open_writer(writer.session_id)
    turn = reopened.projection.turns[0]
    assert turn.end_reason == "interrupted"
    assert reopened.projection.message("a1").content == "half an ans"  # type: ignore[union-attr]
    reopened.close()
    assert store.read(writer.session_id).projection.turns[0].end_reason == "interrupted"


def test_open_authority_and_spill_are_recorded(store: SessionStore) -> None:
    with store.create("p") as writer:
        writer.commit([ev.turn_start("t1"), ev.user_message("u1", "hi")])
        writer.commit(
            [
                {"type": "tool/call", "callId": "c1", "name": "ls", "args": {}},
                ev.turn_end("t1", "completed"),
            ]
        )
        writer.commit([ev.turn_start("t2"), ev.user_message("u2", "again")])
        writer.commit(
            [
                {"type": "tool/result", "callId": "c1", "output": "ok"},
                ev.turn_end("t2", "completed"),
                ev.turn_start("t3"),
            ]
        )
        t1, t2, t3 = writer.projection.turns
    assert t1.open_authority == ("c1",)
    assert t2.open_authority == () and t2.closing_commit_spills
    assert t3.is_open


def test_legacy_history_is_not_verifiable(store: SessionStore) -> None:
    with store.create("legacy") as writer:
        writer.commit(
            [
                {
                    "type": "legacy/import",
                    "messages": [
                        {"role": "user", "content": "old q"},
                        {"role": "assistant", "content": "old a"},
                    ],
                }
            ]
        )
        assert not writer.projection.verifiable
        assert [m.role for m in writer.projection.messages] == ["user", "assistant"]


@pytest.mark.parametrize(
    "event",
    [
        {"type": "no/such"},
        {"type": "turn/end", "turnId": "t"},
        {"type": "turn/end", "turnId": "t", "reason": "exploded"},
        {"type": "message/user", "messageId": "m", "content": "x", "seq": 4},
    ],
)
def test_invalid_events_are_refused_and_nothing_is_written(
    store: SessionStore, event: dict
) -> None:
    with store.create("p") as writer:
        before = (log_file(writer.directory)).read_bytes()
        with pytest.raises(InvalidEvent):
            writer.commit([ev.user_message("ok", "fine"), event])
        assert (log_file(writer.directory)).read_bytes() == before


@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=1, max_size=12))
def test_replay_equals_incremental_projection(layout: list[tuple[int, bool]]) -> None:
    commits = []
    seq = 0

    def stamp(events: list[dict]) -> list[dict]:
        nonlocal seq
        out = []
        for event in events:
            seq += 1
            out.append({"seq": seq, "ts": 0.0, **event})
        return out

    live = Projection()
    for n, (extra, closed) in enumerate(layout):
        turn = f"t{n}"
        commits.append(stamp([ev.turn_start(turn), ev.user_message(f"u{n}", "q")]))
        for k in range(extra):
            commits.append(stamp([ev.assistant_message(f"a{n}", "x" * k, "m", partial=True)]))
        if closed or n < len(layout) - 1:
            commits.append(
                stamp([ev.assistant_message(f"a{n}", "done", "m"), ev.turn_end(turn, "completed")])
            )
    for commit in commits:
        live.apply(commit)
    replayed = Projection.replay(commits)
    assert [(t.turn_id, t.boundary_sequence, t.end_reason) for t in replayed.turns] == [
        (t.turn_id, t.boundary_sequence, t.end_reason) for t in live.turns
    ]
    assert replayed.model_messages() == live.model_messages()
    for turn in replayed.turns:
        if turn.boundary_sequence is not None:
            closing = next(
                c
                for c in commits
                if any(e.get("type") == "turn/end" and e["turnId"] == turn.turn_id for e in c)
            )
            assert turn.boundary_sequence == closing[-1]["seq"]


def test_checksummed_but_senseless_events_are_a_typed_error(store: SessionStore) -> None:
    from branchwise.core.errors import CorruptLog
    from branchwise.core.log.frames import encode_frame

    with store.create("odd") as writer:
        session_id, log = writer.session_id, log_file(writer.directory)
    with open(log, "ab") as handle:  # a well-framed commit whose turn/end lacks turnId
        handle.write(encode_frame(2, [{"seq": 2, "ts": 0.0, "type": "turn/end"}]))
    before = log.read_bytes()
    with pytest.raises(CorruptLog):
        store.read(session_id)
    with pytest.raises(CorruptLog):
        store.open_writer(session_id)
    assert log.read_bytes() == before and not store.is_being_written(session_id)
