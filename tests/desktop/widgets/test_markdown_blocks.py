"""Markdown to blocks: raw HTML escaped, code split out, and appending equals parsing at once."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from branchwise.desktop.widgets.markdown_blocks import (
    CodeBlock,
    IncrementalMarkdown,
    RichColors,
    TextBlock,
    highlight,
    parse_blocks,
)

COLORS = RichColors("#555555", "#999999", "#aaaaaa", "#eeeeee", dark=False)
DARK = RichColors("#aaaaaa", "#666666", "#777777", "#333333", dark=True)

LINES = [
    "plain words",
    "",
    "```python",
    "```",
    "x = <b>1</b>",
    "- item",
    "  continued",
    "1. first",
    "> quote",
    "| a | b |",
    "|---|---|",
    "# Heading",
    "---",
    "    indented code",
    "*emphasis* and `code`",
]


def test_raw_html_is_escaped_never_rendered() -> None:
    ((_line, block),) = parse_blocks("<img src=x onerror=alert(1)> <b>bold</b>", COLORS)
    assert isinstance(block, TextBlock)
    assert "<img" not in block.html and "<b>" not in block.html
    assert "&lt;b&gt;bold&lt;/b&gt;" in block.html


def test_code_blocks_are_their_own_blocks_with_language_and_source() -> None:
    blocks = [b for _l, b in parse_blocks("Hi\n\n```rust extra\nfn main() {}\n```\n", COLORS)]
    assert isinstance(blocks[0], TextBlock)
    assert blocks[1] == CodeBlock(
        "rust", "fn main() {}\n", highlight("fn main() {}\n", "rust", False)
    )


def test_light_and_dark_code_styles_differ() -> None:
    assert highlight("def f(): pass", "python", False) != highlight("def f(): pass", "python", True)
    assert "<span" not in highlight("def f(): pass", "no-such-language", False)


def test_images_become_links() -> None:
    ((_line, block),) = parse_blocks("![chart](https://example.org/c.png)", COLORS)
    assert isinstance(block, TextBlock)
    assert "<img" not in block.html
    assert '<a href="https://example.org/c.png">chart</a>' in block.html


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(LINES), max_size=14), st.lists(st.integers(0, 400), max_size=6))
def test_appending_gives_the_blocks_of_a_whole_parse(lines: list[str], cuts: list[int]) -> None:
    text = "\n".join(lines)
    incremental = IncrementalMarkdown(COLORS)
    for cut in sorted(cuts):
        incremental.update(text[:cut])
    incremental.update(text)
    assert incremental.blocks == [b for _l, b in parse_blocks(text, COLORS)]


def test_a_new_palette_renders_again() -> None:
    incremental = IncrementalMarkdown(COLORS)
    incremental.update("> quote\n\n```python\nx = 1\n```")
    before = list(incremental.blocks)
    incremental.set_colors(DARK)
    assert incremental.blocks != before
    assert incremental.blocks == [b for _l, b in parse_blocks(incremental.source, DARK)]


def test_an_unknown_language_loads_no_plugin_code() -> None:
    # Plugin lexers come with their packages' imports (IPython → jedi, which changes
    # the recursion limit); an unknown fence language must not pull them in.
    script = (
        "import sys\n"
        "from branchwise.desktop.widgets.markdown_blocks import highlight\n"
        "limit = sys.getrecursionlimit()\n"
        "highlight('x = 1', 'no-such-language', False)\n"
        "highlight('x = 1', 'ipython3', False)\n"
        "print(sys.getrecursionlimit() == limit, 'IPython' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["True", "False"], done.stderr
