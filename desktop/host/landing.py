"""Opening a conversation at a turn: which row a jump lands on (no Qt here).

Every jump to a place in a conversation — "Open parent conversation" (its
fork turn), a brought-back card (the branch's turn that was brought back), a
sibling switch (the same turn in the other alternative), a click on the
branch map — names a :class:`TurnTarget`; :meth:`Host.open_at_turn
<branchwise.desktop.host.host.Host.open_at_turn>` opens the conversation
(either source), reads on until the row is there (a big local conversation
opens on its last page, a server's too) and answers a :class:`Landing`; the
window brings that tab forward (or switches a tab in place), scrolls to the
row and highlights it.

A target the conversation does not reach (a branch that has not asked its
own turn yet, a merge whose turn was since trashed) lands on the nearest
row there is, and says so (``exact`` false), rather than failing the jump.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from branchwise.core.conversation.alternatives import turn_after
from branchwise.core.projection.projection import Projection
from branchwise.desktop.host.conversation import ConversationRef
from branchwise.desktop.host.rows import Row


@dataclass(frozen=True, slots=True)
class TurnTarget:
    """Which turn of a conversation a jump should land on.

    Attributes:
        turn_id: the turn (with ``after``: the turn before it; ``None`` there: the start).
        after: land on the turn that follows ``turn_id`` (an alternative's own
            turn: alternatives share everything up to ``turn_id``).
        through_sequence: land on the last turn that ended at or before this
            position of the log (what a branch had when it was brought back);
            used when ``turn_id`` is ``None``.
    """

    turn_id: str | None = None
    after: bool = False
    through_sequence: int | None = None

    @classmethod
    def at(cls, turn_id: str | None) -> TurnTarget:
        """That turn itself."""
        return cls(turn_id)

    @classmethod
    def following(cls, turn_id: str | None) -> TurnTarget:
        """The turn after ``turn_id`` (turn 1 for ``None``)."""
        return cls(turn_id, after=True)

    @classmethod
    def through(cls, sequence: int) -> TurnTarget:
        """The last turn finished by ``sequence``."""
        return cls(None, through_sequence=sequence)


@dataclass(frozen=True, slots=True)
class Landing:
    """Where a jump landed.

    Attributes:
        ref: the conversation opened.
        row_id: the row to bring into view (``None``: the conversation has no rows).
        exact: the row is the turn asked for (false: the nearest one there is).
    """

    ref: ConversationRef
    row_id: str | None
    exact: bool


def landing_row(
    rows: Sequence[Row], projection: Projection | None, target: TurnTarget
) -> tuple[str | None, bool] | None:
    """The row ``target`` names in ``rows`` and whether it is exact; ``None``: not here yet.

    ``None`` means the rows may not hold it yet (a last page shown while the
    rest is read): the caller reads on and asks again with every row, and
    passes ``projection`` (``None`` until the whole history is read).
    """
    turns = [(row.turn_id, row.index) for row in rows]
    wanted: str | None = None
    if target.after:
        wanted = turn_after(turns, target.turn_id)
    elif target.turn_id is not None:
        wanted = target.turn_id
    elif target.through_sequence is not None and projection is not None:
        ended = [
            turn.turn_id
            for turn in projection.turns
            if turn.boundary_sequence is not None
            and turn.boundary_sequence <= target.through_sequence
        ]
        wanted = ended[-1] if ended else None
    if wanted is not None and any(row.turn_id == wanted for row in rows):
        return wanted, True
    return None


def nearest_row(rows: Sequence[Row], target: TurnTarget) -> str | None:
    """Where a jump lands when its turn is not there: the turn it follows, else the last row."""
    shared = target.turn_id
    if target.after and shared is not None and any(row.turn_id == shared for row in rows):
        return shared
    return rows[-1].row_id if rows else None
