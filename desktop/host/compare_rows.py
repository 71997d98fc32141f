"""What the Compare view shows: two to four sides aligned by position from the split.

Row 1 holds each side's first turn after the split, row 2 the second, and
so on; each turn keeps the number its own transcript gives it. A row whose
sides all asked the same prompt is marked, and an answer that is exactly the
first side's (or a row whose sides all answered the same) is collapsed to
"Same answer". Which words differ is found on the
text as rendered (``core/conversation/word_diff.py``), when a row is shown.
Qt-free so it runs off the UI thread and is tested without a window.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import zip_longest

from branchwise.core.conversation.compare import Comparison, SideTurn
from branchwise.core.store.store import SessionStore


@dataclass(frozen=True, slots=True)
class CompareRow:
    """One position after the split: each side's turn there (``None``: that side has fewer).

    Attributes:
        position: 1 for the first turn after the split.
        turns: one per side, in the sides' order.
        same_prompt: every side has a turn here and all asked exactly the same.
        same_answer: every side has a turn here and all answered exactly the same.
        same_as_first: per side, its answer is exactly the first side's (the
            first side's own entry: ``same_answer``), so it need not be read twice.
    """

    position: int
    turns: tuple[SideTurn | None, ...]
    same_prompt: bool
    same_answer: bool
    same_as_first: tuple[bool, ...] = ()

    @property
    def numbers(self) -> tuple[int | None, ...]:
        """Each side's turn number here, as its transcript shows it."""
        return tuple(turn.number if turn is not None else None for turn in self.turns)


def compare_rows(comparison: Comparison) -> list[CompareRow]:
    """The sides' turns aligned by position (1 = the first turn after the split)."""
    rows = []
    columns = zip_longest(*(side.turns for side in comparison.sides))
    for position, turns in enumerate(columns, start=1):
        present = [turn for turn in turns if turn is not None]
        complete = len(present) == len(turns)
        same_prompt = complete and len({turn.prompt for turn in present}) == 1
        same_answer = complete and len({turn.answer for turn in present}) == 1
        first = turns[0]
        same_as_first = (same_answer,) + tuple(
            first is not None and turn is not None and turn.answer == first.answer
            for turn in turns[1:]
        )
        rows.append(CompareRow(position, tuple(turns), same_prompt, same_answer, same_as_first))
    return rows


def split_turn(store: SessionStore, comparison: Comparison) -> tuple[str, int]:
    """The title of the conversation all come from and the number of the last turn shared.

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
