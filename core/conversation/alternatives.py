"""The alternatives at a turn: conversations that share every turn before it and differ at it.

Editing or regenerating turn N forks at the end of turn N-1 (at the start
for N = 1), and a plain branch taken at turn N-1 forks there too: each of
them shares turns 1..N-1 with its parent and has its own turn N. So the one
rule, for all three, is the fork point: every fork whose ``parent.turn_id``
is turn N-1 of a conversation is an alternative at turn N of that
conversation, and the conversation itself is the original (its own turn N,
if it got that far). A fork of a fork at the same point belongs to the same
set (it too shares 1..N-1 and differs at N), so the set is gathered from its
topmost member down. ``child`` sub-conversations start empty and are no
alternative of anything.

Everything here reads manifests only (the lineage index), never a log: the
transcript asks for the sets of the conversation it shows each time it
lists branches, and a family of 1,000 branches costs one pass over the
members' child lists. docs/architecture.md, "Alternatives at a turn".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from branchwise.core.lineage import LineageIndex, creation_order
from branchwise.core.store.manifest import Manifest

FORK = "fork"


@dataclass(frozen=True, slots=True)
class Alternatives:
    """One sibling set: the conversations that share history through one turn and differ after it.

    Attributes:
        after_turn_id: the last turn every member shares (``None``: they differ from turn 1).
        members: the original first, then the others in creation order.
    """

    after_turn_id: str | None
    members: tuple[Manifest, ...]

    @property
    def original(self) -> Manifest:
        """The conversation the others branched from (alternative 1)."""
        return self.members[0]

    def position(self, session_id: str) -> int | None:
        """``session_id``'s 0-based place in the set (``None``: not a member)."""
        for place, manifest in enumerate(self.members):
            if manifest.session_id == session_id:
                return place
        return None

    def step(self, session_id: str, by: int) -> Manifest | None:
        """The member ``by`` places after ``session_id`` (``None`` past either end)."""
        place = self.position(session_id)
        if place is None or not 0 <= place + by < len(self.members):
            return None
        return self.members[place + by]


def _forks_at(index: LineageIndex, session_id: str, turn_id: str | None) -> list[Manifest]:
    return [
        manifest
        for manifest in index.children(session_id)
        if manifest.kind == FORK
        and manifest.parent is not None
        and manifest.parent.turn_id == turn_id
    ]


def _top(index: LineageIndex, manifest: Manifest, turn_id: str | None) -> Manifest:
    """The highest ancestor reached through forks taken at ``turn_id`` (loops end the walk)."""
    seen = {manifest.session_id}
    while True:
        link = manifest.parent
        if link is None or manifest.kind != FORK or link.turn_id != turn_id:
            return manifest
        parent = index.by_id.get(link.session_id)
        if parent is None or parent.session_id in seen:
            return manifest
        seen.add(parent.session_id)
        manifest = parent


def _gather(index: LineageIndex, top: Manifest, turn_id: str | None) -> Alternatives:
    found: dict[str, Manifest] = {}
    stack = [top]
    while stack:
        for fork in _forks_at(index, stack.pop().session_id, turn_id):
            if fork.session_id not in found and fork.session_id != top.session_id:
                found[fork.session_id] = fork
                stack.append(fork)
    rest = sorted(found.values(), key=creation_order)
    return Alternatives(turn_id, (top, *rest))


def alternatives_of(index: LineageIndex, session_id: str) -> dict[str | None, Alternatives]:
    """Every sibling set ``session_id`` belongs to, by the last turn its members share.

    A conversation belongs to the set it was forked into (if it is a fork of
    a conversation still there) and is the original of one set per fork
    point its own forks were taken at. Sets of one member are left out.
    """
    manifest = index.by_id.get(session_id)
    if manifest is None:
        return {}
    sets: dict[str | None, Alternatives] = {}
    link = manifest.parent
    if link is not None and manifest.kind == FORK and link.session_id in index.by_id:
        sets[link.turn_id] = _gather(index, _top(index, manifest, link.turn_id), link.turn_id)
    points = {
        child.parent.turn_id
        for child in index.children(session_id)
        if child.kind == FORK and child.parent is not None
    }
    for point in points - set(sets):
        sets[point] = _gather(index, manifest, point)
    return {point: found for point, found in sets.items() if len(found.members) > 1}


def _following(turns: Iterable[tuple[str | None, int | None]]) -> dict[str | None, str]:
    """Turn id -> the turn after it; ``None`` -> turn 1 (when it is among ``turns``)."""
    following: dict[str | None, str] = {}
    previous: str | None = None
    for turn_id, number in turns:
        if turn_id is None:
            continue  # imported history has no turn
        if number == 1:
            following[None] = turn_id
        if previous is not None:
            following[previous] = turn_id
        previous = turn_id
    return following


def turn_after(turns: Iterable[tuple[str | None, int | None]], after: str | None) -> str | None:
    """The turn that follows ``after`` (``None``: turn 1) in a transcript, if it has it.

    ``turns`` are the transcript's rows in order as ``(turn id, turn number)``;
    a transcript opened on its last page only knows the turns it holds.
    """
    return _following(turns).get(after)


def alternatives_by_turn(
    sets: Mapping[str | None, Alternatives], turns: Iterable[tuple[str | None, int | None]]
) -> dict[str, Alternatives]:
    """Each set placed on the turn its members differ at, in one transcript's turns.

    One pass over the turns, whatever the number of sets.
    """
    following = _following(turns)
    return {following[point]: found for point, found in sets.items() if point in following}
