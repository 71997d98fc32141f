"""Rendered messages as the user sees them: code blocks, Copy code, tables, quotes, raw HTML."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QLabel, QToolButton
from pytestqt.qtbot import QtBot

from branchwise.desktop.host.rows import Entry
from branchwise.desktop.widgets.markdown_view import COPY_CODE_BUTTON, CodeBlockView
from branchwise.desktop.widgets.turn_widget import MessageLabel

ANSWER = """Intro with <script>alert(1)</script> and `inline`.

```python
def greet(name):
    return "<b>" + name
```

| Name | Count |
|------|------:|
| apples | 3 |

> quoted words

```
plain   spaced
```
"""


def _message(qtbot: QtBot, role: str, text: str) -> MessageLabel:
    label = MessageLabel(Entry("m1", role, text))
    qtbot.addWidget(label)
    label.resize(600, 400)
    label.show()
    return label


def test_code_blocks_show_their_language_and_copy_the_code_verbatim(qtbot: QtBot) -> None:
    label = _message(qtbot, "assistant", ANSWER)
    blocks = label.findChildren(CodeBlockView)
    assert [b.language_label.text() for b in blocks] == ["python", "Code"]
    buttons = label.findChildren(QToolButton, COPY_CODE_BUTTON)
    assert [b.accessibleName() for b in buttons] == ["Copy code", "Copy code"]
    assert all(b.isVisible() for b in buttons)
    qtbot.mouseClick(buttons[0], Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == 'def greet(name):\n    return "<b>" + name\n'
    assert buttons[0].text() == "Copied"
    qtbot.waitUntil(lambda: buttons[0].text() == "Copy", timeout=3000)
    qtbot.mouseClick(buttons[1], Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == "plain   spaced\n"


def test_code_is_highlighted_and_raw_html_is_shown_as_text(qtbot: QtBot) -> None:
    label = _message(qtbot, "assistant", ANSWER)
    shown = label.text()
    assert "<script>alert(1)</script>" in shown
    assert 'return "<b>" + name' in shown
    python = label.findChildren(CodeBlockView)[0]
    assert "<span style=" in python.body.text()  # coloured by Pygments
    assert "<script>" not in "".join(w.text() for w in label.findChildren(QLabel))


def test_table_cells_and_quote_read_as_written(qtbot: QtBot) -> None:
    label = _message(qtbot, "assistant", ANSWER)
    lines = label.text().splitlines()
    for cell in ("Name", "Count", "apples", "3", "quoted words"):
        assert cell in lines
    table = next(w.text() for w in label.findChildren(QLabel) if "<table" in w.text())
    # Every header cell carries its column's alignment (Qt centres headers otherwise).
    assert '<th align="left"' in table and '<th align="right"' in table


def test_user_messages_are_rendered_too_and_tool_calls_stay_plain(qtbot: QtBot) -> None:
    user = _message(qtbot, "user", "Please fix **this**:\n\n```js\nlet x = 1;\n```")
    assert user.text() == "Please fix this:\nlet x = 1;"
    assert [b.language_label.text() for b in user.findChildren(CodeBlockView)] == ["js"]
    tool = _message(qtbot, "tool", "search(**x**)")
    assert tool.text() == "Tool call: search(**x**)"
    assert not tool.findChildren(CodeBlockView)


def test_streamed_text_ends_as_if_rendered_at_once(qtbot: QtBot) -> None:
    streamed = _message(qtbot, "assistant", "")
    for end in range(0, len(ANSWER) + 1, 7):
        streamed.set_content(ANSWER[:end])
    streamed.set_content(ANSWER)
    whole = _message(qtbot, "assistant", ANSWER)
    assert streamed.text() == whole.text()
    assert len(streamed.findChildren(CodeBlockView)) == 2


def test_find_selects_the_match_in_the_rendered_text(qtbot: QtBot) -> None:
    source = "Find **me**, then `me` again.\n\n```\nme too\n```"
    label = _message(qtbot, "user", source)
    third = source.index("me too")
    assert label.select_occurrence("ME", third)
    body = label.findChildren(CodeBlockView)[0].body
    assert body.hasSelectedText() and body.selectedText() == "me"
    assert label.selectedText() == "me"
    second = source.index("`me`") + 1
    assert label.select_occurrence("me", second)
    text_label = next(w for w in label.labels() if w is not body)
    assert text_label.selectedText() == "me"
    assert text_label.selectionStart() == "Find me, then me again.".index("me", 6)
    assert not body.hasSelectedText()  # one selection at a time
    assert not label.select_occurrence("absent", 0)
