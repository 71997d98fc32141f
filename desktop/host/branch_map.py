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
import bisect
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

COLUMN = 176.0
"""Pixels from one turn number to the next."""
LANE = 56.0
"""Pixels from one member's lane to the next."""
NODE_WIDTH = 150.0
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


@dataclass(slots=True)
class MapLayout:
    """Where every node and edge of a family map goes, and the tree moves between nodes.

    Attributes:
        family: the map laid out.
        focus: the conversation (and turn, if known) the map was opened from.
        nodes: every node, in the map's order.
        edges: every edge.
        width, height: the scene's size.
    """

    family: FamilyMap
    focus: tuple[str, str | None]
    nodes: tuple[PlacedNode, ...]
    edges: tuple[PlacedEdge, ...]
    width: float
    height: float
    by_key: dict[Key, PlacedNode] = field(default_factory=dict)
    _lanes: list[list[PlacedNode]] = field(default_factory=list)
    _lane_x: list[list[float]] = field(default_factory=list)
    _parent: dict[Key, Key] = field(default_factory=dict)
    _children: dict[Key, list[Key]] = field(default_factory=dict)

    # -- what is in view ------------------------------------------------------

    def nodes_in(self, view: Rect) -> Iterator[PlacedNode]:
        """The nodes that intersect ``view`` (a lane range, then a bisect per lane)."""
        first = max(int((view.y - MARGIN) // LANE), 0)
        last = min(int((view.bottom - MARGIN) // LANE) + 1, len(self._lanes) - 1)
        for lane in range(first, last + 1):
            xs = self._lane_x[lane]
            start = max(bisect.bisect_left(xs, view.x - NODE_WIDTH), 0)
            for placed in self._lanes[lane][start:]:
                if placed.rect.x > view.right:
                    break
                if placed.rect.intersects(view):
                    yield placed

    def edges_in(self, view: Rect) -> Iterator[PlacedEdge]:
        """The edges whose bounds intersect ``view``."""
        return (edge for edge in self.edges if edge.bounds.intersects(view))

    def lane_spans(self) -> Iterator[tuple[int, float, float]]:
        """``(lane, first x, last right)`` of every lane (the mini map draws these)."""
        for lane, placed in enumerate(self._lanes):
            if placed:
                yield lane, placed[0].rect.x, placed[-1].rect.right

    # -- the tree moves (Loom's): parent, child, siblings ----------------------

    def focus_key(self) -> Key | None:
        """The node to select first: the focus turn, else the focus member's last node."""
        session_id, turn_id = self.focus
        found = None
        for placed in self.nodes:
            if placed.node.session_id != session_id:
                continue
            found = placed.node.key
            if turn_id is not None and placed.node.turn_id == turn_id:
                return found
        return found if found is not None else (self.nodes[0].node.key if self.nodes else None)

    def parent(self, key: Key) -> Key | None:
        """The turn before (the one a branch left from, for a branch's first turn)."""
        parent = self._parent.get(key)
        return parent if parent in self.by_key else None

    def children(self, key: Key) -> list[Key]:
        """The next turn of the same conversation first, then the branches leaving here."""
        return list(self._children.get(key, ()))

    def sibling(self, key: Key, step: int) -> Key | None:
        """The previous (``-1``) or next (``1``) alternative to this turn, if any."""
        parent = self._parent.get(key)
        if parent is None:
            return None
        siblings = self._children.get(parent, [])
        at = siblings.index(key) + step
        return siblings[at] if 0 <= at < len(siblings) else None


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

    Linear in nodes and edges, iterative (a chain 2,000 deep is 2,000 lanes).
    """
    lane_of: dict[str, int] = {}
    label_of: dict[str, str] = {}
    placed_nodes: list[PlacedNode] = []
    lanes: list[list[PlacedNode]] = []
    focus_session, focus_turn = focus
    widest = 0.0
    for node in family.nodes:
        lane = lane_of.get(node.session_id)
        if lane is None:
            lane = lane_of[node.session_id] = len(lanes)
            lanes.append([])
            label_of[node.session_id] = node.label
        rect = node_rect(lane, node.turn_index)
        placed = PlacedNode(
            node,
            rect,
            lane,
            node.session_id == focus_session,
            node.session_id == focus_session
            and focus_turn is not None
            and node.turn_id == focus_turn,
        )
        placed_nodes.append(placed)
        lanes[lane].append(placed)
        widest = max(widest, rect.right)
    by_key = {p.node.key: p for p in placed_nodes}
    parent: dict[Key, Key] = {}
    children: dict[Key, list[Key]] = {}
    for lane_nodes in lanes:
        for before, after in zip(lane_nodes, lane_nodes[1:], strict=False):
            parent[after.node.key] = before.node.key
            children.setdefault(before.node.key, []).append(after.node.key)
    edges: list[PlacedEdge] = []
    for edge in family.edges:
        target = by_key.get(edge.target)
        if target is None:
            continue
        if edge.kind != "merge" and edge.target not in parent:
            parent[edge.target] = edge.source
            children.setdefault(edge.source, []).append(edge.target)
        edges.append(_place_edge(edge, by_key, lane_of, target, label_of))
    for lane_nodes in lanes:  # a first turn with no edge in: its own conversation's start
        first = lane_nodes[0].node.key
        if first not in parent:
            start = (first[0], 0)
            parent[first] = start
            children.setdefault(start, []).insert(0, first)
    for keys in children.values():
        keys.sort(key=lambda k: (lane_of.get(k[0], 0), k[1]))
    layout = MapLayout(
        family,
        focus,
        tuple(placed_nodes),
        tuple(edges),
        widest + MARGIN,
        MARGIN * 2 + max(len(lanes) * LANE - (LANE - NODE_HEIGHT), 0),
        by_key,
        lanes,
        [[p.rect.x for p in lane_nodes] for lane_nodes in lanes],
        parent,
        children,
    )
    return layout


def _place_edge(
    edge: MapEdge,
    by_key: dict[Key, PlacedNode],
    lane_of: dict[str, int],
    target: PlacedNode,
    label_of: dict[str, str],
) -> PlacedEdge:
    source = by_key.get(edge.source)
    if source is not None:
        sx, sy = source.rect.right, source.rect.y + NODE_HEIGHT / 2
    else:  # a conversation's start (turn 0): left of its first column
        lane = lane_of.get(edge.source[0], target.lane)
        sx, sy = MARGIN / 2, MARGIN + lane * LANE + NODE_HEIGHT / 2
    tx, ty = target.rect.x, target.rect.y + NODE_HEIGHT / 2
    points: tuple[tuple[float, float], ...]
    if edge.kind == "merge":
        tx, ty = target.rect.x + NODE_WIDTH / 2, target.rect.bottom
        points = ((sx, sy), (tx, sy), (tx, ty))
        label = label_of.get(edge.source[0], "")
    else:
        bend = sx + (tx - sx) / 2 if tx > sx else sx + MARGIN / 2
        points = ((sx, sy), (bend, sy), (bend, ty), (tx, ty))
        label = label_of.get(edge.target[0], "")
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    bounds = Rect(min(xs), min(ys) - LANE / 2, max(xs) - min(xs) + 1, max(ys) - min(ys) + LANE)
    return PlacedEdge(edge, points, label, bounds)


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
