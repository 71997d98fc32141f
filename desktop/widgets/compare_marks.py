"""Mark differing words inside rendered Markdown blocks (no Qt here).

The compare view renders answers with the transcript's own renderer
(``markdown_blocks.py``) and diffs the text a reader sees, not the Markdown
source: ``**red**`` and ``red`` read the same, and a table's pipes are not
words. :func:`visible_text` is that text, read from the rendered blocks' HTML
(text between tags, entities decoded; a line break or the end of a
paragraph, list item or table cell counts as one newline so words on either
side stay apart). :func:`mark_blocks` wraps the given character ranges of
that text in a tinted span, inside the text nodes only, so the tags the
renderer wrote (tables, code colours) are left as they are.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace

from branchwise.core.conversation.word_diff import Range
from branchwise.desktop.widgets.markdown_blocks import Block

_PIECE = re.compile(r"(<[^>]*>)|([^<]+)")
# Tags after which the reader sees a new line (or a new cell).
_BREAK = re.compile(r"<(br\b|/(p|li|td|th|tr|h[1-6]|pre|div|table|ul|ol)\s*>)", re.IGNORECASE)


def _pieces(markup: str) -> Iterator[tuple[str, str, int]]:
    """``(markup, text, length)`` per piece: a tag (text "" or "\\n") or a text node."""
    for match in _PIECE.finditer(markup):
        tag, text = match.group(1), match.group(2)
        if tag is not None:
            breaks = "\n" if _BREAK.match(tag) else ""
            yield tag, breaks, len(breaks)
        else:
            decoded = html.unescape(text)
            yield text, decoded, len(decoded)


def block_text(block: Block) -> str:
    """The text one rendered block shows."""
    return "".join(text for _markup, text, _length in _pieces(block.html))


def visible_text(blocks: Sequence[Block]) -> str:
    """The text rendered blocks show, one newline between blocks."""
    return "\n".join(block_text(block) for block in blocks)


def mark_blocks(
    blocks: Sequence[Block], ranges: Sequence[Range], background: str, foreground: str
) -> list[Block]:
    """``blocks`` with the ``ranges`` of :func:`visible_text` on a tint.

    ``foreground`` is the text colour paired with ``background`` (readable on
    it in the current theme). Code keeps its own colours outside the marks.
    """
    marked: list[Block] = []
    start = 0
    for block in blocks:
        length = len(block_text(block))
        inside = [
            (max(s, start) - start, min(e, start + length) - start)
            for s, e in ranges
            if s < start + length and e > start
        ]
        if inside:
            block = replace(block, html=_mark(block.html, inside, background, foreground))
        marked.append(block)
        start += length + 1
    return marked


def _mark(markup: str, ranges: Sequence[Range], background: str, foreground: str) -> str:
    opening = f'<span style="background-color: {background}; color: {foreground};">'
    out: list[str] = []
    at = 0
    for raw, text, length in _pieces(markup):
        if raw.startswith("<"):
            out.append(raw)
        else:
            out.append(_mark_text(text, at, ranges, opening))
        at += length
    return "".join(out)


def _mark_text(text: str, offset: int, ranges: Sequence[Range], opening: str) -> str:
    end = offset + len(text)
    parts: list[str] = []
    cursor = offset
    for s, e in ranges:
        if e <= cursor or s >= end:
            continue
        s, e = max(s, cursor), min(e, end)
        if s > cursor:
            parts.append(html.escape(text[cursor - offset : s - offset], quote=False))
        parts.append(f"{opening}{html.escape(text[s - offset : e - offset], quote=False)}</span>")
        cursor = e
    parts.append(html.escape(text[cursor - offset :], quote=False))
    return "".join(parts)
