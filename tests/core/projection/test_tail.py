"""The catch-up hook: what a log's tail changed, read from a remembered position."""

from __future__ import annotations

from typing import Any

from branchwise.core.log.frames import encode_frame
from branchwise.core.projection import events as ev
from branchwise.core.projection.tail import TailPosition, TailText, read_tail


def _log(commits: list[list[dict[str, Any]]], first_commit: int = 1, first_seq: int = 1) -> bytes:
    """Frame bytes of ``commits``, each event stamped with its seq and time."""
    out, seq = b"", first_seq
    for number, commit in enumerate(commits, start=first_commit):
        stamped = []
        for event in commit:
            stamped.append({**event, "seq": seq, "ts": 1000.0 + seq})
            seq += 1
        out += encode_frame(number, stamped)
    return out


def _unasked(_: str) -> Any:
    raise AssertionError("the tail starts outside any streaming answer: nothing to ask")


def test_a_tail_from_the_start_holds_titles_texts_merges_and_the_next_position() -> None:
    data = _log(
        [
            [ev.session_created("Trip")],
            [ev.turn_start("t1"), ev.user_message("u1", "Where to?")],
            [ev.assistant_delta("Ky", ("a1", "m")), ev.assistant_delta("oto")],
            [ev.assistant_message("a1", "Kyoto.", "m"), ev.turn_end("t1", "completed")],
            [
                ev.session_merge(
                    child_session_id="kid",
                    child_boundary_sequence=4,
                    operation_id="op",
                    content="c",
                    kind="note",
                )
            ],
        ]
    )
    read = read_tail(
        data, TailPosition(1, 1, None, ""), streamed_before=_unasked, text_before=_unasked
    )
    assert (read.frames, read.consumed) == (5, len(data))
    assert read.end == TailPosition(6, 9, None, "Trip")
    assert read.texts == (
        TailText("u1", "user", "t1", "Where to?"),
        TailText("a1", "assistant", "t1", "Kyoto."),
    )
    assert [(m.child_session_id, m.sequence) for m in read.merges] == [("kid", 8)]


def test_a_tail_inside_a_streaming_answer_continues_the_text_read_before() -> None:
    first = _log(
        [
            [ev.turn_start("t1"), ev.user_message("u1", "q")],
            [ev.assistant_delta("Bra", ("a1", "m"))],
        ]
    )
    before = read_tail(
        first, TailPosition(1, 1, None, ""), streamed_before=_unasked, text_before=_unasked
    )
    assert before.end.open_turn == "t1"
    asked: list[str] = []
    tail = _log([[ev.assistant_delta("nch")], [ev.assistant_delta("ing")]], 3, 4)

    def streamed(turn_id: str) -> str | None:
        asked.append(turn_id)
        return "a1"

    read = read_tail(tail, before.end, streamed_before=streamed, text_before=lambda _: "Bra")
    assert asked == ["t1"]  # once: later deltas continue the answer it named
    assert read.texts == (TailText("a1", "assistant", "t1", "Branching"),)
    torn = read_tail(tail[:-3], before.end, streamed_before=streamed, text_before=lambda _: "")
    assert torn.frames == 1 and torn.consumed < len(tail)  # a growing last frame waits


def test_imported_history_is_named_per_log() -> None:
    data = _log([[{"type": "legacy/import", "messages": [{"role": "user", "content": "hi"}]}]])
    read = read_tail(
        data, TailPosition(1, 1, None, ""), streamed_before=_unasked, text_before=_unasked
    )
    assert read.texts == (TailText("legacy-1-0", "user", None, "hi", shared=False),)
