"""Compare two conversations of one lineage tree from where they split.

Two conversations of one tree share history up to their *last common fork
point*: the nearest session both descend from (or one of them), at the
earlier of the two places they leave it. Everything after that point is what
differs, and that is what a side-by-side view shows: each side's turns after
the point, prompts and answers.

Walking up uses the manifests' parent links only (no log reads); the shared
session's log is read once to place the point on a turn, and each side's log
once for its turns. Turn ids are inherited by forks, so a side's turns after
the point are found by the common turn's id in its own projection. A child
(sub-agent) conversation inherits no history: it is placed at its spawning
turn and all its turns are its side.
"""

from __future__ import annotations

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
    """One turn after the common point: its prompt and its answer."""

    turn_id: str
    prompt: str
    answer: str

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
    """Two conversations from their last common fork point."""

    common: CommonPoint | None
    left: Side
    right: Side

    def to_json(self) -> dict[str, Any]:
        """``{"common", "left", "right"}``."""
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
    left_chain = lineage(store, validate_session_id(left_id)).chain
    right_chain = lineage(store, validate_session_id(right_id)).chain
    right_index = {m.session_id: i for i, m in enumerate(right_chain)}
    shared = next(
        (
            (i, right_index[m.session_id])
            for i, m in enumerate(left_chain)
            if m.session_id in right_index
        ),
        None,
    )
    if shared is None:
        raise NotRelated(
            f"{left_id} and {right_id} are in different conversation trees",
            left=left_id,
            right=right_id,
        )
    left_at, right_at = shared
    common_session = left_chain[left_at]
    projection = store.read(common_session.session_id).projection
    turns = list(projection.turns)
    position = min(
        _position(turns, left_chain[left_at - 1].parent if left_at else None),
        _position(turns, right_chain[right_at - 1].parent if right_at else None),
    )
    common_turn = turns[position - 1] if position else None
    common = CommonPoint(
        common_session.session_id,
        common_turn.turn_id if common_turn else None,
        (common_turn.boundary_sequence or 0) if common_turn else 0,
    )
    return Comparison(
        common,
        _side(store, left_chain[0], common.turn_id),
        _side(store, right_chain[0], common.turn_id),
    )


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
    )
