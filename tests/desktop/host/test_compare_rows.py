"""The Compare view's rows: alignment by position, same prompts, word and character diffs."""

from __future__ import annotations

from pathlib import Path

from helpers.forking import fork_at
from helpers.sessions import complete_turn

from branchwise.core.conversation.compare import Comparison, Side, SideTurn, compare
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.compare_rows import (
    Span,
    compare_rows,
    split_turn,
    tokens,
    word_diff,
)


def _changed(spans: tuple[Span, ...]) -> list[str]:
    return [s.text for s in spans if s.changed]


def test_two_answers_differ_only_in_the_changed_words() -> None:
    left, right = word_diff("The cat sat on the mat.", "The dog sat on the mat.")
    assert _changed(left) == ["cat"] and _changed(right) == ["dog"]
    assert "".join(s.text for s in left) == "The cat sat on the mat."
    assert "".join(s.text for s in right) == "The dog sat on the mat."


def test_identical_answers_mark_nothing() -> None:
    left, right = word_diff("same words", "same words")
    assert left == right == (Span("same words", False),)


def test_chinese_is_compared_by_character() -> None:
    assert tokens("我喜欢猫 ok") == ["我", "喜", "欢", "猫", " ", "ok"]
    left, right = word_diff("我喜欢猫。", "我喜欢狗。")
    assert _changed(left) == ["猫"] and _changed(right) == ["狗"]


def test_rows_align_by_position_and_mark_same_prompts() -> None:
    comparison = Comparison(
        None,
        Side("a", "A", (SideTurn("t1", "why?", "because red"), SideTurn("t2", "more", "x"))),
        Side("b", "B", (SideTurn("t3", "why?", "because blue"),)),
    )
    rows = compare_rows(comparison)
    assert [r.position for r in rows] == [1, 2]
    assert rows[0].same_prompt and _changed(rows[0].right_answer) == ["blue"]
    assert rows[1].right is None and not rows[1].same_prompt
    assert rows[1].left_answer == (Span("x", False),) and rows[1].right_answer == ()


def test_different_prompts_mark_no_words() -> None:
    comparison = Comparison(
        None,
        Side("a", "A", (SideTurn("t1", "one", "red apple"),)),
        Side("b", "B", (SideTurn("t2", "two", "green apple"),)),
    )
    (row,) = compare_rows(comparison)
    assert not row.same_prompt and not _changed(row.left_answer)


def test_split_turn_names_the_shared_conversation_and_turn(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    with store.create("Trip plans") as writer:
        for turn in ("r1", "r2", "r3"):
            complete_turn(writer, turn, f"ask {turn}")
        root = writer.session_id
    branch = fork_at(store, root, "r2", op="op-b").child_session_id
    assert split_turn(store, compare(store, root, branch)) == ("Trip plans", 2)
