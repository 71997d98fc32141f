"""Marking words inside rendered Markdown: the text a reader sees, tags left as written."""

from __future__ import annotations

from branchwise.core.conversation.word_diff import against_first
from branchwise.desktop.widgets.compare_marks import mark_blocks, visible_text
from branchwise.desktop.widgets.markdown_blocks import CodeBlock, RichColors, parse_blocks

COLORS = RichColors("#777777", "#888888", "#999999", "#eeeeee", dark=False)
OPEN = '<span style="background-color: #ffe27a; color: #1c1c1c;">'


def _blocks(text: str) -> list:
    return [block for _line, block in parse_blocks(text, COLORS)]


def test_the_visible_text_has_no_markup() -> None:
    blocks = _blocks("Paint it **red** & *soon*.\n\n| A | B |\n|---|---|\n| x | y |\n")
    text = visible_text(blocks)
    assert "Paint it red & soon." in text
    assert "**" not in text and "|" not in text and "&amp;" not in text
    assert "x" in text and "A" in text


def test_marks_wrap_only_the_changed_words_of_rendered_blocks() -> None:
    left, right = _blocks("Paint it **red** today."), _blocks("Paint it **blue** today.")
    marks = against_first([visible_text(left), visible_text(right)])
    (marked,) = mark_blocks(right, marks[1], "#ffe27a", "#1c1c1c")
    assert f"<strong>{OPEN}blue</span></strong>" in marked.html
    assert marked.html.count("<span") == 1


def test_code_keeps_its_highlighting_around_a_marked_identifier() -> None:
    base = "```python\ntotal = sum(values)\n```\n"
    other = "```python\ntotal = max(values)\n```\n"
    left, right = _blocks(base), _blocks(other)
    marks = against_first([visible_text(left), visible_text(right)])
    (marked,) = mark_blocks(right, marks[1], "#ffe27a", "#1c1c1c")
    assert isinstance(marked, CodeBlock) and marked.code == "total = max(values)\n"
    assert f"{OPEN}max</span>" in marked.html
    assert marked.html.count('<span style="color') == right[0].html.count('<span style="color')


def test_chinese_in_a_table_cell_is_marked_by_character() -> None:
    left = _blocks("| 城市 | 天气 |\n|---|---|\n| 北京 | 晴 |\n")
    right = _blocks("| 城市 | 天气 |\n|---|---|\n| 北京 | 雨 |\n")
    marks = against_first([visible_text(left), visible_text(right)])
    (marked,) = mark_blocks(right, marks[1], "#ffe27a", "#1c1c1c")
    assert f"{OPEN}雨</span>" in marked.html and "北京" in marked.html
