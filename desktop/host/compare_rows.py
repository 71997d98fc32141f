"""What the Compare view shows: two sides aligned by position, answers diffed by word.

Two answers to the same prompt (the usual result of Regenerate) differ in a
few words; showing which ones is the point of comparing them. Words are
compared as tokens (``difflib.SequenceMatcher``); Chinese has no spaces
between words, so a run of Han characters is split into single characters
and compared by character. Qt-free so it is tested without a window.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from itertools import zip_longest

from branchwise.core.conversation.compare import Comparison, SideTurn
from branchwise.core.store.store import SessionStore

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
# One Han character, a run of other word characters, a run of spaces, or one other character.
_TOKEN = re.compile(rf"[{_HAN}]|[^\W{_HAN}]+|\s+|[^\w\s]")


@dataclass(frozen=True, slots=True)
class Span:
    """A piece of an answer; ``changed`` when the other answer does not have it."""

    text: str
    changed: bool


@dataclass(frozen=True, slots=True)
class CompareRow:
    """One position after the split: each side's turn there (``None``: that side has fewer).

    Attributes:
        same_prompt: both sides asked exactly the same thing here.
        left_answer, right_answer: the answers in spans; words differ only
            where the prompts are the same (otherwise the answers are not
            two takes on one question, and nothing is marked).
    """

    position: int
    left: SideTurn | None
    right: SideTurn | None
    same_prompt: bool
    left_answer: tuple[Span, ...]
    right_answer: tuple[Span, ...]


def tokens(text: str) -> list[str]:
    """Words, spaces and punctuation; each Han character on its own."""
    return _TOKEN.findall(text)


def word_diff(left: str, right: str) -> tuple[tuple[Span, ...], tuple[Span, ...]]:
    """Both texts in spans, the words only one of them has marked ``changed``."""
    a, b = tokens(left), tokens(right)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    left_spans: list[Span] = []
    right_spans: list[Span] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        changed = tag != "equal"
        _extend(left_spans, a[i1:i2], changed)
        _extend(right_spans, b[j1:j2], changed)
    return tuple(left_spans), tuple(right_spans)


def _extend(spans: list[Span], words: list[str], changed: bool) -> None:
    """Append words, merging with the previous span of the same kind.

    Spaces alone are never marked: a changed run of spaces says nothing.
    """
    for word in words:
        marked = changed and not word.isspace()
        if spans and spans[-1].changed == marked:
            spans[-1] = Span(spans[-1].text + word, marked)
        else:
            spans.append(Span(word, marked))


def compare_rows(comparison: Comparison) -> list[CompareRow]:
    """The two sides' turns aligned by position (1 = the first turn after the split)."""
    rows = []
    pairs = zip_longest(comparison.left.turns, comparison.right.turns)
    for position, (left, right) in enumerate(pairs, start=1):
        same = left is not None and right is not None and left.prompt == right.prompt
        if same and left is not None and right is not None:
            left_answer, right_answer = word_diff(left.answer, right.answer)
        else:
            left_answer = (Span(left.answer, False),) if left is not None else ()
            right_answer = (Span(right.answer, False),) if right is not None else ()
        rows.append(CompareRow(position, left, right, same, left_answer, right_answer))
    return rows


def split_turn(store: SessionStore, comparison: Comparison) -> tuple[str, int]:
    """The title of the conversation both come from and the number of the last turn shared.

    0 when they share no turn (one forked at the very start).
    """
    common = comparison.common
    if common is None:
        return "", 0
    projection = store.read(common.session_id).projection
    number = 0
    if common.turn_id is not None:
        for turn in projection.turns:
            if turn.turn_id == common.turn_id:
                number = turn.index
    return projection.title, number
