"""The Compare view's rows: alignment by position, transcript numbers, same prompts and answers."""

from __future__ import annotations

from pathlib import Path

from helpers.forking import fork_at
from helpers.sessions import complete_turn

from branchwise.core.conversation.compare import Comparison, Side, SideTurn, compare
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.compare_rows import compare_rows, split_turn


def test_rows_align_by_position_and_keep_transcript_numbers() -> None:
    comparison = Comparison(
        None,
        (
            Side("a", "A", (SideTurn("t1", "why?", "red", 2), SideTurn("t2", "more", "x", 3))),
            Side("b", "B", (SideTurn("t3", "why?", "blue", 2),)),
            Side("c", "C", (SideTurn("t4", "why?", "red", 2), SideTurn("t5", "more", "x", 3))),
        ),
    )
    rows = compare_rows(comparison)
    assert [r.position for r in rows] == [1, 2]
    assert rows[0].numbers == (2, 2, 2) and rows[1].numbers == (3, None, 3)
    assert rows[0].same_prompt and not rows[0].same_answer
    # A side without a turn here: neither the same prompt nor the same answer.
    assert not rows[1].same_prompt and not rows[1].same_answer


def test_identical_answers_are_the_same_answer() -> None:
    comparison = Comparison(
        None,
        (
            Side("a", "A", (SideTurn("t1", "one", "apple", 4),)),
            Side("b", "B", (SideTurn("t2", "two", "apple", 4),)),
        ),
    )
    (row,) = compare_rows(comparison)
    assert row.same_answer and not row.same_prompt
    assert row.same_as_first == (True, True)


def test_an_answer_like_the_first_sides_is_marked_per_side() -> None:
    comparison = Comparison(
        None,
        (
            Side("a", "A", (SideTurn("t1", "one", "apple", 4),)),
            Side("b", "B", (SideTurn("t2", "one", "pear", 4),)),
            Side("c", "C", (SideTurn("t1", "one", "apple", 4),)),
        ),
    )
    (row,) = compare_rows(comparison)
    assert not row.same_answer and row.same_as_first == (False, False, True)


def test_split_turn_names_the_shared_conversation_and_turn(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    with store.create("Trip plans") as writer:
        for turn in ("r1", "r2", "r3"):
            complete_turn(writer, turn, f"ask {turn}")
        root = writer.session_id
    branch = fork_at(store, root, "r2", op="op-b").child_session_id
    assert split_turn(store, compare(store, root, branch)) == ("Trip plans", 2)
