"""Compare two to four conversations of one lineage tree from where they split.

Conversations of one tree share history up to their *last common fork
point*: the nearest session all descend from (or one of them), at the
earliest of the places they leave it. Everything after that point is what
differs, and that is what a side-by-side view shows: each side's turns after
the point, prompts and answers, each numbered as its own transcript numbers
it (inherited turns count, so a branch taken after turn 1 starts at turn 2).

Walking up uses the manifests' parent links only (no log reads); the shared
session's log is read once to place the point on a turn, and each side's log
once for its turns. Turn ids are inherited by forks, so a side's turns after
the point are found by the common turn's id in its own projection. A child
(sub-agent) conversation inherits no history: it is placed at its spawning
turn and all its turns are its side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from branchwise.core.errors import NotRelated
from branchwise.core.ids import validate_session_id
from branchwise.core.lineage import lineage
from branchwise.core.projection.projection import Projection
from branchwise.core.projection.turns import Turn
from branchwise.core.store.manifest import Manifest, ParentLink
from branchwise.core.store.store import SessionStore


@dataclass(frozen=True, slots=True)
class CommonPoint:
    """Where two conversations split.

    Attributes:
        session_id: the conversation both descend from (or one of the two).
        turn_id: its last turn they share (``None``: they share no turn).
        boundary_sequence: that turn's boundary in ``session_id`` (0 at the start).
    """

    session_id: str
    turn_id: str | None
    boundary_sequence: int

    def to_json(self) -> dict[str, Any]:
        """camelCase form for the CLI."""
        return {
            "sessionId": self.session_id,
            "turnId": self.turn_id,
            "boundarySequence": self.boundary_sequence,
        }


@dataclass(frozen=True, slots=True)
class SideTurn:
    """One turn after the common point: its prompt and its answer.

    Attributes:
        number: the turn's number in its own transcript (1-based, inherited
            turns counted); not in the CLI shape.
    """

    turn_id: str
    prompt: str
    answer: str
    number: int = 0

    def to_json(self) -> dict[str, Any]:
        """camelCase form for the CLI."""
        return {"turnId": self.turn_id, "prompt": self.prompt, "answer": self.answer}


@dataclass(frozen=True, slots=True)
class Side:
    """One conversation's turns after the common point."""

    session_id: str
    title: str
    turns: tuple[SideTurn, ...]

    def to_json(self) -> dict[str, Any]:
        """camelCase form for the CLI (the title is for people, not in the CLI shape)."""
        return {"sessionId": self.session_id, "turns": [t.to_json() for t in self.turns]}


@dataclass(frozen=True, slots=True)
class Comparison:
    """Two to four conversations from their last common fork point, in the order asked."""

    common: CommonPoint | None
    sides: tuple[Side, ...]

    @property
    def left(self) -> Side:
        """The first conversation asked."""
        return self.sides[0]

    @property
    def right(self) -> Side:
        """The second conversation asked."""
        return self.sides[1]

    def to_json(self) -> dict[str, Any]:
        """``{"common", "left", "right"}`` (the CLI compares two)."""
        return {
            "common": self.common.to_json() if self.common else None,
            "left": self.left.to_json(),
            "right": self.right.to_json(),
        }


def compare(store: SessionStore, left_id: str, right_id: str) -> Comparison:
    """The last common fork point of two conversations and each side's turns after it.

    Raises:
        InvalidSessionId, SessionNotFound: an id is malformed or not a conversation.
        NotRelated: the two are in different lineage trees.
        LineageCycle: damaged parent links loop.
    """
    return compare_all(store, [left_id, right_id])


def compare_all(store: SessionStore, session_ids: Sequence[str]) -> Comparison:
    """The last common fork point of several conversations and each one's turns after it.

    One side per id, in the order given. The point is the nearest session
    every one descends from, at the earliest turn any of them leaves it, so
    every side's rows start at the same turn (an edit of turn 3 and a branch
    taken after turn 3 both start at turn 3; the branch's turn 3 is the
    parent's, inherited).

    Raises:
        InvalidSessionId, SessionNotFound: an id is malformed or not a conversation.
        NotRelated: two of them are in different lineage trees.
        LineageCycle: damaged parent links loop.
    """
    chains = [lineage(store, validate_session_id(sid)).chain for sid in session_ids]
    indexes = [{m.session_id: i for i, m in enumerate(chain)} for chain in chains]
    shared = next(
        (m.session_id for m in chains[0] if all(m.session_id in index for index in indexes)),
        None,
    )
    if shared is None:
        other = next(
            (
                session_ids[k]
                for k, index in enumerate(indexes)
                if not any(m.session_id in index for m in chains[0])
            ),
            session_ids[-1],
        )
        raise NotRelated(
            f"{session_ids[0]} and {other} are in different conversation trees",
            left=session_ids[0],
            right=other,
        )
    projection = store.read(shared).projection
    turns = list(projection.turns)
    position = min(
        _position(turns, chain[index[shared] - 1].parent if index[shared] else None)
        for chain, index in zip(chains, indexes, strict=True)
    )
    common_turn = turns[position - 1] if position else None
    common = CommonPoint(
        shared,
        common_turn.turn_id if common_turn else None,
        (common_turn.boundary_sequence or 0) if common_turn else 0,
    )
    return Comparison(common, tuple(_side(store, chain[0], common.turn_id) for chain in chains))


def _position(turns: list[Turn], link: ParentLink | None) -> int:
    """How many of the shared session's turns a side holds: all of them without a link."""
    if link is None:
        return len(turns)
    if link.turn_id is None:  # a fork at the start
        return 0
    for turn in reversed(turns):
        if turn.turn_id == link.turn_id:
            return turn.index
    return 0


def _side(store: SessionStore, manifest: Manifest, after_turn_id: str | None) -> Side:
    projection = store.read(manifest.session_id).projection
    turns = list(projection.turns)
    start = 0
    if after_turn_id is not None:
        start = next(
            (i + 1 for i in range(len(turns) - 1, -1, -1) if turns[i].turn_id == after_turn_id),
            0,
        )
    return Side(
        manifest.session_id,
        projection.title,
        tuple(_side_turn(projection, turn) for turn in turns[start:]),
    )


def _side_turn(projection: Projection, turn: Turn) -> SideTurn:
    prompt = projection.message(turn.user_message_id) if turn.user_message_id else None
    answer = projection.message(turn.message_id) if turn.message_id else None
    return SideTurn(
        turn.turn_id,
        prompt.content if prompt is not None else "",
        answer.content if answer is not None else "",
        turn.index,
    )
