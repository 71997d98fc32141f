"""Word-level differences: words, characters of unspaced scripts, mixed text and code."""

from __future__ import annotations

from branchwise.core.conversation.word_diff import (
    MIN_SHARED,
    Span,
    against_first,
    changed_ranges,
    diff_texts,
    spans,
    tokens,
    word_diff,
)


def _changed(found: tuple[Span, ...]) -> list[str]:
    return [s.text for s in found if s.changed]


def test_two_answers_differ_only_in_the_changed_words() -> None:
    left, right = word_diff("The cat sat on the mat.", "The dog sat on the mat.")
    assert _changed(left) == ["cat"] and _changed(right) == ["dog"]
    assert "".join(s.text for s in left) == "The cat sat on the mat."
    assert "".join(s.text for s in right) == "The dog sat on the mat."


def test_identical_texts_mark_nothing() -> None:
    left, right = word_diff("same words", "same words")
    assert left == right == (Span("same words", False),)


def test_neighbouring_changed_words_are_one_span_without_the_spaces_around() -> None:
    left, right = word_diff("one two three four", "one TWO THREE four")
    assert _changed(left) == ["two three"] and _changed(right) == ["TWO THREE"]


def test_chinese_is_compared_by_character() -> None:
    assert tokens("我喜欢猫 ok") == ["我", "喜", "欢", "猫", " ", "ok"]
    left, right = word_diff("我喜欢猫。", "我喜欢狗。")
    assert _changed(left) == ["猫"] and _changed(right) == ["狗"]


def test_japanese_and_thai_are_compared_by_character() -> None:
    assert tokens("すしを") == ["す", "し", "を"]
    assert tokens("カタカナ") == ["カ", "タ", "カ", "ナ"]
    left, right = word_diff("今日は晴れです", "今日は雨です")
    assert _changed(left) == ["晴れ"] and _changed(right) == ["雨"]
    left, right = word_diff("สวัสดีครับ", "สวัสดีค่ะ")
    assert _changed(left) == ["รับ"] and _changed(right) == ["่ะ"]


def test_mixed_text_compares_latin_words_whole_and_han_by_character() -> None:
    left, right = word_diff("用 Python 写一个脚本", "用 Rust 写两个脚本")
    assert _changed(left) == ["Python", "一"] and _changed(right) == ["Rust", "两"]


def test_code_compares_identifiers_and_keeps_its_lines() -> None:
    base = "def total(meals):\n    return sum(meals.values())\n"
    other = "def total(meals):\n    return max(meals.values())\n"
    left, right = word_diff(base, other)
    assert _changed(left) == ["sum"] and _changed(right) == ["max"]
    assert "".join(s.text for s in right) == other


def test_ranges_point_into_the_texts() -> None:
    base, other = "a red door", "a blue door"
    (left,), (right,) = changed_ranges(base, other)
    assert base[left[0] : left[1]] == "red" and other[right[0] : right[1]] == "blue"
    assert spans(base, [left]) == (Span("a ", False), Span("red", True), Span(" door", False))


def test_several_texts_are_compared_with_the_first() -> None:
    texts = ["a b c", "a x c", "a b d"]
    marks = against_first(texts)
    assert [[t[s:e] for s, e in ranges] for t, ranges in zip(texts, marks, strict=True)] == [
        ["b", "c"],  # what some other text does not have of the first
        ["x"],
        ["d"],
    ]


def test_texts_with_little_in_common_are_not_marked() -> None:
    texts = [
        "Try Ohara instead, it is calm.",
        "Spend the day at Nishiki Market.",
        "Try Kurama instead, it is calm.",
    ]
    assert diff_texts(texts[0], texts[1]).shared < MIN_SHARED
    assert diff_texts(texts[0], texts[2]).shared > MIN_SHARED
    marks = against_first(texts)
    assert [[t[s:e] for s, e in ranges] for t, ranges in zip(texts, marks, strict=True)] == [
        ["Ohara"],
        [],
        ["Kurama"],
    ]
