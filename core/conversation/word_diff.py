"""Which words of one answer another answer does not have.

Two answers to the same prompt (the usual result of Regenerate) differ in a
few words; showing which ones is the point of comparing them. Texts are
compared as tokens (``difflib.SequenceMatcher``): a run of letters or digits
is one word, but scripts written without spaces between words (Chinese,
Japanese, Thai, Lao, Khmer, Myanmar…) have no such runs, so each of their
characters is a token of its own and they are compared by character.
Spaces, line breaks and punctuation are tokens too, so code compares as its
identifiers and symbols; a changed run of spaces alone is never marked (it
says nothing a reader can see).

The answer is character ranges (``start``, ``end``) into the texts given, so
a caller can mark them in whatever it shows: the compare view diffs the text
as rendered (no ``**`` or table pipes) and marks the rendered blocks.
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

#: Scripts written without spaces between words: CJK ideographs (with their
#: extensions and compatibility forms), kana, Thai, Lao, Tibetan, Myanmar, Khmer.
_UNSPACED = (
    "\u0e00-\u0e7f"  # Thai
    "\u0e80-\u0eff"  # Lao
    "\u0f00-\u0fff"  # Tibetan
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width katakana
    "\U00020000-\U0003134f"  # CJK extensions B to G
)
# One unspaced-script character, a run of other word characters, a run of
# spaces, or one other character (punctuation, a symbol).
_TOKEN = re.compile(rf"[{_UNSPACED}]|[^\W{_UNSPACED}]+|\s+|[^\w\s]")

Range = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Span:
    """A piece of a text; ``changed`` when the other text does not have it."""

    text: str
    changed: bool


def tokens(text: str) -> list[str]:
    """Words, spaces and punctuation; each character of an unspaced script on its own.

    Joined, the tokens are ``text`` again.
    """
    return _TOKEN.findall(text)


@dataclass(frozen=True, slots=True)
class TextDiff:
    """How two texts differ.

    Attributes:
        base, other: the character ranges of each that the other does not have.
        shared: the share of the two texts' words (not spaces) they have in
            common, 0 to 1.
    """

    base: list[Range]
    other: list[Range]
    shared: float


def diff_texts(base: str, other: str) -> TextDiff:
    """Which words of ``base`` and of ``other`` the other text does not have.

    Ranges are ``(start, end)``, in order, merged when adjacent, never
    covering spaces alone (a changed word's surrounding spaces stay unmarked).
    """
    a, b = tokens(base), tokens(other)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    starts_a, starts_b = _starts(a), _starts(b)
    base_ranges: list[Range] = []
    other_ranges: list[Range] = []
    same = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            same += sum(1 for word in a[i1:i2] if not word.isspace())
            continue
        _add(base_ranges, a, starts_a, i1, i2)
        _add(other_ranges, b, starts_b, j1, j2)
    words = sum(1 for word in a if not word.isspace()) + sum(1 for w in b if not w.isspace())
    return TextDiff(base_ranges, other_ranges, 2 * same / words if words else 1.0)


def changed_ranges(base: str, other: str) -> tuple[list[Range], list[Range]]:
    """The character ranges of ``base`` and of ``other`` that the other text does not have."""
    found = diff_texts(base, other)
    return found.base, found.other


def _starts(words: list[str]) -> list[int]:
    starts, at = [], 0
    for word in words:
        starts.append(at)
        at += len(word)
    return starts


def _add(ranges: list[Range], words: list[str], starts: list[int], first: int, last: int) -> None:
    for k in range(first, last):
        word = words[k]
        if word.isspace():
            continue
        start, end = starts[k], starts[k] + len(word)
        # A space between two changed words is marked with them (one span, not two).
        if ranges and all(w.isspace() for w in _between(words, starts, ranges[-1][1], start)):
            ranges[-1] = (ranges[-1][0], end)
        else:
            ranges.append((start, end))


def _between(words: list[str], starts: list[int], end: int, start: int) -> list[str]:
    """The tokens from offset ``end`` up to offset ``start`` (both on token edges)."""
    if start == end:
        return []
    first = bisect.bisect_left(starts, end)
    last = bisect.bisect_left(starts, start)
    return words[first:last]


def union(ranges: Sequence[Sequence[Range]]) -> list[Range]:
    """Several lists of ranges over one text as one sorted list, overlaps merged."""
    merged: list[Range] = []
    for start, end in sorted(r for each in ranges for r in each):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def spans(text: str, ranges: Sequence[Range]) -> tuple[Span, ...]:
    """``text`` cut into spans, those inside ``ranges`` marked ``changed``."""
    found: list[Span] = []
    at = 0
    for start, end in ranges:
        if start > at:
            found.append(Span(text[at:start], False))
        found.append(Span(text[start:end], True))
        at = end
    if at < len(text) or not found:
        found.append(Span(text[at:], False))
    return tuple(found)


def word_diff(left: str, right: str) -> tuple[tuple[Span, ...], tuple[Span, ...]]:
    """Both texts in spans, the words only one of them has marked ``changed``."""
    left_ranges, right_ranges = changed_ranges(left, right)
    return spans(left, left_ranges), spans(right, right_ranges)


#: Below this share of common words two texts are not two takes on one answer,
#: and marking nearly every word would only hide the few that are shared.
MIN_SHARED = 0.4


def against_first(texts: Sequence[str], min_shared: float = MIN_SHARED) -> list[list[Range]]:
    """Changed ranges of each of several texts, all compared with the first.

    The first text's ranges are what any other text does not have of it;
    every other text's, what it has that the first does not. A text sharing
    less than ``min_shared`` of its words with the first is not marked (nor
    is the first on its account): it is a different answer, not a variant.
    """
    if not texts:
        return []
    base, others = texts[0], texts[1:]
    diffs = [diff_texts(base, other) for other in others]
    kept = [diff if diff.shared >= min_shared else TextDiff([], [], diff.shared) for diff in diffs]
    return [union([diff.base for diff in kept]), *[diff.other for diff in kept]]
