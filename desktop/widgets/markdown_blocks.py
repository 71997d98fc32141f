"""Markdown to Qt rich text, one top-level block at a time (no Qt here).

Messages are parsed by markdown-it-py (CommonMark plus tables) with raw HTML
switched off, so anything a model writes between angle brackets is shown as
text and never rendered. The result is a list of top-level blocks: fenced or
indented code becomes a :class:`CodeBlock` (its own widget, with a language
label and a Copy button), everything else a :class:`TextBlock` of HTML in the
subset Qt's rich text understands — table cells carry an explicit ``align``
(Qt centres header cells by default, which put the first header off its
column) and block quotes are a one-row table whose first cell is the bar
(Qt's rich text draws no CSS borders on blocks).

Streaming answers grow at the end only, so :class:`IncrementalMarkdown`
parses again just the last block and what follows it: the blocks before the
last one are final in CommonMark once a later block has started (link
reference definitions aside, which are carried forward but not back).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import pygments
from markdown_it import MarkdownIt
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_all_lexers, get_lexer_by_name
from pygments.util import ClassNotFound

#: Pygments styles for code on a light and on a dark background.
LIGHT_CODE_STYLE = "default"
DARK_CODE_STYLE = "github-dark"


@dataclass(frozen=True)
class RichColors:
    """The colours rich text needs, taken from the palette by the view (``#rrggbb``).

    Attributes:
        muted: block quote text.
        border: table rules.
        quote_bar: the bar left of a block quote.
        code_background: behind inline code.
        dark: the background is dark (picks the Pygments style).
    """

    muted: str
    border: str
    quote_bar: str
    code_background: str
    dark: bool


@dataclass(frozen=True)
class TextBlock:
    """Anything but code at the top level, as Qt rich text."""

    html: str


@dataclass(frozen=True)
class CodeBlock:
    """A fenced or indented code block.

    Attributes:
        language: the first word of the fence's info string ("" when none).
        code: the code exactly as written (what Copy puts on the clipboard).
        html: the code highlighted for Qt rich text (wrapping, monospace).
    """

    language: str
    code: str
    html: str


Block = TextBlock | CodeBlock


def _cell_open(
    self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    style = str(token.attrGet("style") or "")
    align = style.partition(":")[2] or "left"
    return f'<{token.tag} align="{align}" style="padding: 4px 8px;">'


def _table_open(
    self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    border = env["colors"].border
    return (
        f'<table border="1" cellspacing="0" cellpadding="4" '
        f'style="border-collapse: collapse; border-color: {border}; border-style: solid; '
        f'margin: 4px 0;">'
    )


def _blockquote_open(
    self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    colors: RichColors = env["colors"]
    return (
        '<table cellspacing="0" cellpadding="0" style="margin: 4px 0;"><tr>'
        f'<td width="4" bgcolor="{colors.quote_bar}"></td>'
        f'<td style="padding-left: 10px; color: {colors.muted};">'
    )


def _blockquote_close(
    self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return "</td></tr></table>\n"


def _code_inline(
    self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    background = env["colors"].code_background
    return (
        f'<code style="background-color: {background};">'
        f"{html.escape(tokens[idx].content, quote=False)}</code>"
    )


def _nested_code(
    self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    # Code inside a list or a quote stays in the text block (highlighted, no Copy button).
    token = tokens[idx]
    return highlight(token.content, fence_language(token.info), env["colors"].dark) + "\n"


def _image(self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    # A link instead of an image: Qt would read local files named by a model's answer.
    token = tokens[idx]
    src = html.escape(str(token.attrGet("src") or ""))
    alt = html.escape(token.content or src, quote=False)
    return f'<a href="{src}">{alt}</a>'


@lru_cache(maxsize=2)
def markdown_parser(breaks: bool = False) -> MarkdownIt:
    """CommonMark + tables, raw HTML off, with the Qt-friendly render rules above.

    ``breaks`` keeps every line break (for prompts, typed with Shift+Enter as lines).
    """
    parser = MarkdownIt("commonmark", {"html": False, "breaks": breaks}).enable("table")
    rules = {
        "th_open": _cell_open,
        "td_open": _cell_open,
        "table_open": _table_open,
        "blockquote_open": _blockquote_open,
        "blockquote_close": _blockquote_close,
        "code_inline": _code_inline,
        "fence": _nested_code,
        "code_block": _nested_code,
        "image": _image,
    }
    for name, rule in rules.items():
        parser.add_render_rule(name, rule)
    return parser


def fence_language(info: str) -> str:
    """The language a fence names: the first word of its info string."""
    return info.strip().split(maxsplit=1)[0] if info.strip() else ""


@lru_cache(maxsize=1)
def _builtin_languages() -> frozenset[str]:
    # Only Pygments' own lexers: looking a name up among plugin lexers imports
    # whatever installed them (IPython, which imports jedi, which changes the
    # interpreter's recursion limit), for any unknown language a model writes.
    return frozenset(
        alias
        for _name, aliases, _files, _types in get_all_lexers(plugins=False)
        for alias in aliases
    )


@lru_cache(maxsize=64)
def _lexer(language: str) -> Lexer | None:
    if language not in _builtin_languages():
        return None
    try:
        return get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


@lru_cache(maxsize=2)
def _formatter(dark: bool) -> HtmlFormatter[str]:
    return HtmlFormatter(
        noclasses=True, nowrap=True, style=DARK_CODE_STYLE if dark else LIGHT_CODE_STYLE
    )


def highlight(code: str, language: str, dark: bool) -> str:
    """``code`` as wrapping monospace rich text, coloured by Pygments when the language is known.

    An unknown or missing language is shown uncoloured: guessing is slow and
    often wrong on short snippets.
    """
    code = code.removesuffix("\n")
    lexer = _lexer(language.lower()) if language else None
    if lexer is None:
        body = html.escape(code, quote=False)
    else:
        body = pygments.highlight(code, lexer, _formatter(dark)).removesuffix("\n")
    return (
        '<div style="white-space: pre-wrap; font-family: monospace;">'
        f"{body.replace(chr(10), '<br>')}</div>"
    )


def _top_level_groups(tokens: Sequence[Token]) -> list[list[Token]]:
    groups: list[list[Token]] = []
    current: list[Token] = []
    for token in tokens:
        current.append(token)
        if token.level == 0 and token.nesting <= 0:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def parse_blocks(
    source: str, colors: RichColors, env: dict[str, Any] | None = None, breaks: bool = False
) -> list[tuple[int, Block]]:
    """The top-level blocks of ``source`` with the source line each starts on.

    ``env`` carries link reference definitions between calls (it is updated);
    ``breaks`` keeps line breaks inside paragraphs.
    """
    parser = markdown_parser(breaks)
    env = env if env is not None else {}
    env["colors"] = colors
    tokens = parser.parse(source, env)
    blocks: list[tuple[int, Block]] = []
    for group in _top_level_groups(tokens):
        first = group[0]
        line = first.map[0] if first.map else 0
        if len(group) == 1 and first.type in ("fence", "code_block"):
            language = fence_language(first.info) if first.type == "fence" else ""
            blocks.append(
                (
                    line,
                    CodeBlock(
                        language, first.content, highlight(first.content, language, colors.dark)
                    ),
                )
            )
        else:
            blocks.append((line, TextBlock(parser.renderer.render(group, parser.options, env))))
    return blocks


def _line_offset(text: str, line: int) -> int:
    offset = 0
    for _ in range(line):
        found = text.find("\n", offset)
        if found < 0:
            return len(text)
        offset = found + 1
    return offset


@dataclass
class IncrementalMarkdown:
    """The blocks of a text that mostly grows at its end.

    Attributes:
        colors: the colours rendered into the HTML.
        breaks: keep line breaks inside paragraphs (prompts).
        source: the text the blocks show.
        blocks: its top-level blocks, in order.
    """

    colors: RichColors
    breaks: bool = False
    source: str = ""
    blocks: list[Block] = field(default_factory=list)
    _tail_offset: int = 0
    _tail_index: int = 0
    _env: dict[str, Any] = field(default_factory=dict)

    def update(self, source: str) -> int:
        """Show ``source``; returns the index of the first block that may have changed.

        When ``source`` extends the current text only its last block is parsed
        again; any other change parses everything.
        """
        if self.blocks and source.startswith(self.source):
            start, offset = self._tail_index, self._tail_offset
        else:
            start, offset, self._env = 0, 0, {}
        tail = source[offset:]
        env = dict(self._env)
        parsed = parse_blocks(tail, self.colors, env, self.breaks)
        self.blocks[start:] = [block for _line, block in parsed]
        if parsed:
            self._tail_index = start + len(parsed) - 1
            self._tail_offset = offset + _line_offset(tail, parsed[-1][0])
        else:
            self._tail_index, self._tail_offset = start, offset
        # Link reference definitions found so far stay known to the tail's next parse.
        self._env = {key: value for key, value in env.items() if key != "colors"}
        self.source = source
        return start

    def set_colors(self, colors: RichColors) -> None:
        """Render everything again in ``colors`` (the theme changed)."""
        self.colors = colors
        source, self.source, self.blocks = self.source, "", []
        self.update(source)
