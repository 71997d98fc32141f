"""The branch map's data and geometry, read and laid out off the UI thread.

The map itself comes from core (:mod:`branchwise.core.conversation.family_map`):
for a conversation of this machine the host takes the family's manifests
from its lineage index (on the UI thread, where the index lives) and reads
each member's turns in a worker thread; for a server's conversation it asks
``GET /sessions/{id}/map``. Either way the answer is the same
:class:`FamilyMap`, laid out here into a :class:`MapLayout` the widget only
paints.

Layout: one lane (row) per member, in the map's depth-first order, so a
branch's lane comes right below its parent's subtree; one column per turn
number, so a branch's first own turn sits in the column after the turn it
left from and turns of the same number line up across branches. Nothing
here knows Qt; the widget asks :meth:`MapLayout.nodes_in` for what is in
view, so painting costs what is visible, not the family's size.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field

from branchwise.core.conversation.family_map import (
    FamilyMap,
    MapEdge,
    MapNode,
    build_map,
    members_of,
    read_family,
)
from branchwise.core.lineage import LineageIndex
from branchwise.core.store.store import SessionStore

COLUMN = 216.0
"""Pixels from one column (turn number) to the next."""
LANE = 60.0
"""Pixels from one member's lane to the next (the gap holds the edges' words)."""
NODE_WIDTH = 180.0
NODE_HEIGHT = 34.0
MARGIN = 24.0

Key = tuple[str, int]
"""``(sessionId, turnIndex)``: a node, or a conversation's start (turn 0)."""


@dataclass(frozen=True, slots=True)
class Rect:
    """An axis-aligned rectangle in scene pixels."""

    x: float
    y: float
    width: float
    height: float

    @property
    def right(self) -> float:
        """Its right edge."""
        return self.x + self.width

    @property
    def bottom(self) -> float:
        """Its bottom edge."""
        return self.y + self.height

    def intersects(self, other: Rect) -> bool:
        """Whether the two overlap."""
        return (
            self.x < other.right
            and other.x < self.right
            and self.y < other.bottom
            and other.y < self.bottom
        )


@dataclass(frozen=True, slots=True)
class PlacedNode:
    """A node where it is drawn, and how (the widget words and colours it)."""

    node: MapNode
    rect: Rect
    lane: int
    in_focus_member: bool
    focus_turn: bool


@dataclass(frozen=True, slots=True)
class PlacedEdge:
    """An edge as a polyline, with the member it leads to (whose label it carries)."""

    edge: MapEdge
    points: tuple[tuple[float, float], ...]
    label: str
    bounds: Rect


_EdgeEntry = tuple[MapEdge, int, int, float, float, float, float]


@dataclass(slots=True)
class MapLayout:
    """Where every node and edge of a family map goes, and the tree moves between nodes.

    Built in one pass over the nodes (a member's nodes are consecutive in the
    map, so a lane is a slice of them) and one over the edges; positions are
    arithmetic on (lane, turn number), so what is in view is found without
    looking at the rest, and :class:`PlacedNode` and :class:`PlacedEdge`
    values are made only for what is asked for.

    Attributes:
        family: the map laid out.
        focus: the conversation (and turn, if known) the map was opened from.
        width, height: the scene's size.
    """

    family: FamilyMap
    focus: tuple[str, str | None]
    width: float = 0.0
    height: float = 0.0
    # lane -> (first node's position in family.nodes, its turn number, node count)
    _lanes: list[tuple[int, int, int]] = field(default_factory=list)
    _lane_of: dict[str, int] = field(default_factory=dict)
    # lane -> columns its turn numbers are shifted right by (a child conversation,
    # numbered from 1, starts in the column after the turn that spawned it)
    _shift: list[int] = field(default_factory=list)
    # per edge: (edge, source lane, target lane, bounds as x0, y0, x1, y1)
    _edges: list[_EdgeEntry] = field(default_factory=list)
    _incoming: dict[str, Key] = field(default_factory=dict)
    _outgoing: dict[Key, list[Key]] = field(default_factory=dict)

    # -- nodes ----------------------------------------------------------------

    def member_ids(self) -> frozenset[str]:
        """The conversations the map draws."""
        return frozenset(self._lane_of)

    def placed(self, key: Key | None) -> PlacedNode | None:
        """The node at ``key`` where it is drawn (``None``: no such node)."""
        if key is None:
            return None
        lane = self._lane_of.get(key[0])
        if lane is None:
            return None
        first, first_turn, count = self._lanes[lane]
        at = key[1] - first_turn
        if not 0 <= at < count:
            return None
        return self._place(lane, self.family.nodes[first + at])

    def _place(self, lane: int, node: MapNode) -> PlacedNode:
        session_id, turn_id = self.focus
        mine = node.session_id == session_id
        return PlacedNode(
            node,
            self._rect(lane, node.turn_index),
            lane,
            mine,
            mine and turn_id is not None and node.turn_id == turn_id,
        )

    def _rect(self, lane: int, turn_index: int) -> Rect:
        return node_rect(lane, turn_index + self._shift[lane])

    @property
    def nodes(self) -> tuple[PlacedNode, ...]:
        """Every node placed, in the map's order (all of them: for tests and small maps)."""
        return tuple(
            self._place(lane, self.family.nodes[first + i])
            for lane, (first, _turn, count) in enumerate(self._lanes)
            for i in range(count)
        )

    @property
    def edges(self) -> tuple[PlacedEdge, ...]:
        """Every edge placed, in the map's order."""
        return tuple(self._place_edge(entry) for entry in self._edges)

    def nodes_in(self, view: Rect) -> Iterator[PlacedNode]:
        """The nodes that intersect ``view``: a lane range, then a turn range per lane."""
        first_lane = max(int((view.y - MARGIN) // LANE), 0)
        last_lane = min(int((view.bottom - MARGIN) // LANE) + 1, len(self._lanes) - 1)
        low = int((view.x - MARGIN - NODE_WIDTH) // COLUMN) + 1
        high = int((view.right - MARGIN) // COLUMN) + 1
        for lane in range(first_lane, last_lane + 1):
            first, first_turn, count = self._lanes[lane]
            shift = self._shift[lane]
            start = max(low - shift - first_turn, 0)
            stop = min(high - shift - first_turn + 1, count)
            for i in range(start, stop):
                placed = self._place(lane, self.family.nodes[first + i])
                if placed.rect.intersects(view):
                    yield placed

    def edges_in(self, view: Rect) -> Iterator[PlacedEdge]:
        """The edges whose bounds intersect ``view``."""
        for entry in self._edges:
            _edge, _s, _t, x0, y0, x1, y1 = entry
            if x0 < view.right and view.x < x1 and y0 < view.bottom and view.y < y1:
                yield self._place_edge(entry)

    def lane_spans(self) -> Iterator[tuple[int, float, float]]:
        """``(lane, first x, last right)`` of every lane (the mini map draws these)."""
        for lane, (_first, first_turn, count) in enumerate(self._lanes):
            yield (
                lane,
                self._rect(lane, first_turn).x,
                self._rect(lane, first_turn + count - 1).right,
            )

    # -- the tree moves (Loom's): parent, child, siblings ----------------------

    def focus_key(self) -> Key | None:
        """The node to select first: the focus turn, else the focus member's last node."""
        session_id, turn_id = self.focus
        lane = self._lane_of.get(session_id)
        if lane is None:
            return self.family.nodes[0].key if self.family.nodes else None
        first, _turn, count = self._lanes[lane]
        nodes = self.family.nodes[first : first + count]
        found = next((n for n in nodes if turn_id is not None and n.turn_id == turn_id), None)
        return (found or nodes[-1]).key

    def parent(self, key: Key) -> Key | None:
        """The turn before (the one a branch left from, for a branch's first turn)."""
        lane = self._lane_of.get(key[0])
        if lane is None:
            return None
        _first, first_turn, _count = self._lanes[lane]
        if key[1] > first_turn:
            return (key[0], key[1] - 1)
        source = self._incoming.get(key[0])
        return source if self.placed(source) is not None else None

    def children(self, key: Key) -> list[Key]:
        """The next turn of the same conversation first, then the branches leaving here."""
        found = []
        after = (key[0], key[1] + 1)
        if self.placed(after) is not None:
            found.append(after)
        found.extend(self._outgoing.get(key, ()))
        return found

    def sibling(self, key: Key, step: int) -> Key | None:
        """The previous (``-1``) or next (``1``) alternative to this turn, if any.

        The alternatives are the children of the turn before (a first turn's:
        of its conversation's start, where edits of the first prompt leave).
        """
        lane = self._lane_of.get(key[0])
        if lane is None:
            return None
        _first, first_turn, _count = self._lanes[lane]
        if key[1] > first_turn:
            before: Key = (key[0], key[1] - 1)
        else:
            before = self._incoming.get(key[0], (key[0], 0))
        siblings = self.children(before)
        if key not in siblings:
            return None
        at = siblings.index(key) + step
        return siblings[at] if 0 <= at < len(siblings) else None

    def _place_edge(self, entry: _EdgeEntry) -> PlacedEdge:
        edge, source_lane, target_lane, x0, y0, x1, y1 = entry
        target = self._rect(target_lane, edge.target[1])
        if edge.source[1] >= 1 and self.placed(edge.source) is not None:
            source = self._rect(source_lane, edge.source[1])
            sx, sy = source.right, source.y + NODE_HEIGHT / 2
        else:  # a conversation's start (turn 0): left of its first column
            sx, sy = MARGIN / 2, MARGIN + source_lane * LANE + NODE_HEIGHT / 2
        points: tuple[tuple[float, float], ...]
        if edge.kind == "merge":
            tx, ty = target.x + NODE_WIDTH / 2, target.bottom
            points = ((sx, sy), (tx, sy), (tx, ty))
        else:
            tx, ty = target.x, target.y + NODE_HEIGHT / 2
            bend = sx + (tx - sx) / 2 if tx > sx else sx + MARGIN / 2
            points = ((sx, sy), (bend, sy), (bend, ty), (tx, ty))
        labelled = edge.source[0] if edge.kind == "merge" else edge.target[0]
        label = self.placed((labelled, self._lanes[self._lane_of[labelled]][1]))
        return PlacedEdge(
            edge, points, label.node.label if label else "", Rect(x0, y0, x1 - x0, y1 - y0)
        )


def node_rect(lane: int, turn_index: int) -> Rect:
    """Where the node of ``turn_index`` on ``lane`` is drawn."""
    return Rect(
        MARGIN + max(turn_index - 1, 0) * COLUMN,
        MARGIN + lane * LANE,
        NODE_WIDTH,
        NODE_HEIGHT,
    )


def lay_out(family: FamilyMap, focus: tuple[str, str | None]) -> MapLayout:
    """Place a map: lanes in the map's (depth-first) order, columns by turn number.

    One pass over the nodes and one over the edges, iterative (a chain 2,000
    deep is 2,000 lanes); nothing per node is made until it is asked for.
    """
    layout = MapLayout(family, focus)
    lanes, lane_of = layout._lanes, layout._lane_of
    previous = None
    last_turn = 0
    for position, node in enumerate(family.nodes):
        sid = node.session_id
        if sid != previous:
            if previous is not None:
                first, first_turn, _ = lanes[-1]
                lanes[-1] = (first, first_turn, position - first)
            lane_of[sid] = len(lanes)
            lanes.append((position, node.turn_index, 0))
            previous = sid
        last_turn = max(last_turn, node.turn_index)
    if lanes:
        first, first_turn, _ = lanes[-1]
        lanes[-1] = (first, first_turn, len(family.nodes) - first)
    half = NODE_HEIGHT / 2
    shift = layout._shift
    shift.extend(0 for _ in lanes)
    last_column = last_turn
    for edge in family.edges:
        target_lane = lane_of.get(edge.target[0])
        if target_lane is None:
            continue
        source_lane = lane_of.get(edge.source[0], target_lane)
        if edge.kind != "merge" and edge.target[0] not in layout._incoming:
            layout._incoming[edge.target[0]] = edge.source
            layout._outgoing.setdefault(edge.source, []).append(edge.target)
            # Parents come before their branches, so the source's shift is final here.
            wanted = edge.source[1] + shift[source_lane] + 1 - lanes[target_lane][1]
            shift[target_lane] = max(wanted, 0)
            _first, first_turn, count = lanes[target_lane]
            last_column = max(last_column, first_turn + count - 1 + shift[target_lane])
        source_column = edge.source[1] + shift[source_lane]
        target_column = edge.target[1] + shift[target_lane]
        x0 = MARGIN / 2 + max(source_column - 1, 0) * COLUMN
        x1 = MARGIN + max(target_column - 1, 0) * COLUMN + NODE_WIDTH
        top, bottom = sorted((source_lane, target_lane))
        y0 = MARGIN + top * LANE - half
        y1 = MARGIN + bottom * LANE + NODE_HEIGHT + half
        layout._edges.append((edge, source_lane, target_lane, min(x0, x1), y0, max(x0, x1), y1))
    layout.width = MARGIN * 2 + max(last_column, 1) * COLUMN
    layout.height = MARGIN * 2 + max(len(lanes) * LANE - (LANE - NODE_HEIGHT), 0)
    return layout


# -- reading a map for the window ------------------------------------------------


async def local_map(
    store: SessionStore, index: LineageIndex, session_id: str, running: Collection[str]
) -> FamilyMap:
    """A local family's map: members from the index here, turns read in a worker thread.

    Raises:
        InvalidSessionId, SessionNotFound: the conversation is gone (or in the Trash).
    """
    members = members_of(store, session_id, index)
    turns = await asyncio.to_thread(read_family, store, members, running)
    return build_map(members, turns)


async def laid_out(family: FamilyMap, focus: tuple[str, str | None]) -> MapLayout:
    """:func:`lay_out` in a worker thread (a family of 1,000 branches has thousands of nodes)."""
    return await asyncio.to_thread(lay_out, family, focus)
