"""The branch map: one conversation family at turn granularity.

A family is a root and every fork and child conversation below it. The map
has one node per turn a member wrote itself (inherited turns are the
ancestor's nodes, so a shared history is drawn once), and edges where a
member leaves another: a plain branch from the turn it was cut after, an
edit or a regenerate from the turn before the one it asks again (what the
manifest's origin says, so it is drawn beside the turn it replaces), a child
conversation from the turn that spawned it, and a merge from the branch's
turn that was brought back into the parent's turn it follows.

Everything comes from manifests (the lineage index) and each member's
projected turn list (``SessionStore.read`` without frames, so a projection
snapshot may stand for the history); no frame is interpreted here. Trashed
members are not in the store, so they are simply absent; a member whose log
cannot be read is still placed (its turns, if any could be read, or one
``damaged`` node), so a damaged branch never makes its family disappear.

Node kinds:

* ``turn``: a finished turn (or one a crash left open: nothing writes it).
* ``running``: the member's open turn while a writer holds the session.
* ``empty``: a member without turns of its own yet; its ``turnIndex`` is
  where its first turn will be, ``turnId`` is ``null``.
* ``damaged``: a turn of a member whose log is corrupt, or the one node of a
  member whose log cannot be read at all (``turnId`` ``null``).

An edge's ``from.turnIndex`` is 0 for a branch taken before its parent's
first turn (an edit of the first prompt): the start of the conversation.

A node's ``label`` is its member's branch label (the one rule in
:mod:`~branchwise.core.conversation.names`, rendered in the active language;
``""`` for the family's top), its ``title`` the member's title.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from branchwise.core.conversation.names import label_of, render_label
from branchwise.core.errors import BranchwiseError, SessionNotFound
from branchwise.core.ids import validate_session_id
from branchwise.core.lineage import LineageIndex, TreeNode, _build, lineage
from branchwise.core.store.manifest import Manifest
from branchwise.core.store.store import SessionStore

NodeKind = Literal["turn", "running", "empty", "damaged"]
EdgeKind = Literal["fork", "edit", "regenerate", "child", "merge"]


@dataclass(frozen=True, slots=True)
class MapNode:
    """One turn a member wrote itself (or the placeholder of a member without any).

    Attributes:
        session_id: the member.
        turn_index: the 1-based turn number as the member's transcript numbers it.
        turn_id: the turn, ``None`` for an ``empty`` or unreadable member.
        label: what distinguishes the member from its siblings.
        title: the member's title.
        kind: see the module's docstring.
    """

    session_id: str
    turn_index: int
    turn_id: str | None
    label: str
    title: str
    kind: NodeKind

    @property
    def key(self) -> tuple[str, int]:
        """``(sessionId, turnIndex)``, what edges name."""
        return (self.session_id, self.turn_index)

    def to_json(self) -> dict[str, Any]:
        """``{"sessionId", "turnIndex", "turnId", "label", "title", "kind"}``."""
        return {
            "sessionId": self.session_id,
            "turnIndex": self.turn_index,
            "turnId": self.turn_id,
            "label": self.label,
            "title": self.title,
            "kind": self.kind,
        }


@dataclass(frozen=True, slots=True)
class MapEdge:
    """Where one member leaves another, or a merge back into an ancestor."""

    source: tuple[str, int]
    target: tuple[str, int]
    kind: EdgeKind

    def to_json(self) -> dict[str, Any]:
        """``{"from": {"sessionId", "turnIndex"}, "to": {...}, "kind"}``."""
        return {
            "from": {"sessionId": self.source[0], "turnIndex": self.source[1]},
            "to": {"sessionId": self.target[0], "turnIndex": self.target[1]},
            "kind": self.kind,
        }


@dataclass(frozen=True, slots=True)
class FamilyMap:
    """The whole map: members depth-first (oldest branch first), nodes in turn order."""

    root_session_id: str
    nodes: tuple[MapNode, ...]
    edges: tuple[MapEdge, ...]

    def to_json(self) -> dict[str, Any]:
        """The ``session map`` answer (docs/cli.md)."""
        return {
            "rootSessionId": self.root_session_id,
            "nodes": [node.to_json() for node in self.nodes],
            "edges": [edge.to_json() for edge in self.edges],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FamilyMap:
        """The map a server answered (the same shape :meth:`to_json` writes).

        Raises:
            KeyError, TypeError, ValueError: a malformed answer.
        """
        nodes = tuple(
            MapNode(
                str(n["sessionId"]),
                int(n["turnIndex"]),
                None if n["turnId"] is None else str(n["turnId"]),
                str(n["label"]),
                str(n["title"]),
                _node_kind(n["kind"]),
            )
            for n in data["nodes"]
        )
        edges = tuple(
            MapEdge(
                (str(e["from"]["sessionId"]), int(e["from"]["turnIndex"])),
                (str(e["to"]["sessionId"]), int(e["to"]["turnIndex"])),
                _edge_kind(e["kind"]),
            )
            for e in data["edges"]
        )
        return cls(str(data["rootSessionId"]), nodes, edges)

    def to_dot(self) -> str:
        """The map as a Graphviz digraph (``session map --format dot``)."""
        lines = ["digraph family {", "  rankdir=LR;", "  node [shape=box];"]
        for node in self.nodes:
            text = f"{node.turn_index}. {node.label}" if node.label else str(node.turn_index)
            shape = {"running": ", style=bold", "damaged": ", style=dashed"}.get(node.kind, "")
            lines.append(f"  {_dot_id(node.key)} [label={_dot_string(text)}{shape}];")
        known = {node.key for node in self.nodes}
        for edge in self.edges:
            for end in (edge.source, edge.target):
                if end not in known:  # the start of a conversation (turn 0)
                    known.add(end)
                    lines.append(f"  {_dot_id(end)} [shape=point];")
        for node, after in zip(self.nodes, self.nodes[1:], strict=False):
            if node.session_id == after.session_id:
                lines.append(f"  {_dot_id(node.key)} -> {_dot_id(after.key)};")
        for edge in self.edges:
            style = ", style=dashed" if edge.kind in ("merge", "child") else ""
            lines.append(
                f"  {_dot_id(edge.source)} -> {_dot_id(edge.target)}"
                f" [label={_dot_string(edge.kind)}{style}];"
            )
        lines.append("}")
        return "\n".join(lines) + "\n"


def _node_kind(value: object) -> NodeKind:
    for kind in ("turn", "running", "empty", "damaged"):
        if value == kind:
            return kind
    raise ValueError(f"unknown node kind {value!r}")


def _edge_kind(value: object) -> EdgeKind:
    for kind in ("fork", "edit", "regenerate", "child", "merge"):
        if value == kind:
            return kind
    raise ValueError(f"unknown edge kind {value!r}")


def _dot_id(key: tuple[str, int]) -> str:
    return _dot_string(f"{key[0]}#{key[1]}")


def _dot_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


# -- reading a family ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberTurns:
    """What the map needs of one member's log: its turns, and whether it could be read.

    Attributes:
        turns: ``(turnId, startSeq, boundarySequence)`` of every turn, inherited ones included.
        own_from: the index (0-based) of its first own turn in ``turns``.
        open_turn: the id of its open turn while a writer holds it (``None`` otherwise).
        merges: ``(childSessionId, childBoundarySequence, seq)`` of what was brought back.
        damaged: the log is corrupt or could not be read.
    """

    turns: tuple[tuple[str, int, int | None], ...] = ()
    own_from: int = 0
    open_turn: str | None = None
    merges: tuple[tuple[str, int, int], ...] = ()
    damaged: bool = False


def read_member(store: SessionStore, manifest: Manifest) -> MemberTurns:
    """One member's turns from its projection (a snapshot may stand for the frames)."""
    try:
        snapshot = store.read(manifest.session_id, every_frame=False)
    except BranchwiseError:
        return MemberTurns(damaged=True)
    projection = snapshot.projection
    turns = tuple((t.turn_id, t.start_seq, t.boundary_sequence) for t in projection.turns)
    own_from = sum(1 for t in projection.turns if t.start_seq <= projection.seed_length)
    open_turn = projection.open_turn
    running = (
        open_turn.turn_id
        if open_turn is not None and store.is_being_written(manifest.session_id)
        else None
    )
    merges = tuple(
        (str(m["childSessionId"]), int(m["childBoundarySequence"]), int(m["seq"]))
        for m in projection.merges
    )
    return MemberTurns(turns, own_from, running, merges, snapshot.scan.corruption is not None)


def family_root(store: SessionStore, session_id: str, index: LineageIndex) -> Manifest:
    """The top of ``session_id``'s family: its root, or the highest ancestor still present.

    A branch whose parent is in the Trash heads a family of its own (the
    sidebar shows it at the top level too).

    Raises:
        SessionNotFound: no such session (a trashed one included).
    """
    validate_session_id(session_id)
    if session_id not in index.by_id:
        store.manifest(session_id)  # the precise error: missing or damaged
        raise SessionNotFound(f"no session {session_id}", sessionId=session_id)
    top = index.by_id[session_id]
    seen = {top.session_id}
    while top.parent is not None and top.parent.session_id in index.by_id:
        top = index.by_id[top.parent.session_id]
        if top.session_id in seen:  # a damaged parent loop: stop where it closes
            break
        seen.add(top.session_id)
    return top


def family_members(index: LineageIndex, top: Manifest) -> list[Manifest]:
    """Every member under ``top``, depth-first, oldest branch first (the tree's order)."""
    tree: TreeNode = _build(top, index._oldest_first, set())
    return [node.manifest for node, _depth in tree.walk()]


def family_map(
    store: SessionStore,
    session_id: str,
    *,
    index: LineageIndex | None = None,
    running: Collection[str] = (),
) -> FamilyMap:
    """The map of the family ``session_id`` belongs to (any member names it).

    Args:
        index: the caller's lineage index (the desktop's); otherwise one
            manifest scan builds one.
        running: sessions the caller knows are answering (the desktop's own
            turns, whose lease this process holds).

    Raises:
        InvalidSessionId: a malformed id.
        SessionNotFound: no such session, or it is in the Trash.
    """
    if index is None:
        index = LineageIndex.build(store.iter_manifests())
    members = members_of(store, session_id, index)
    return build_map(members, read_family(store, members, running))


def members_of(store: SessionStore, session_id: str, index: LineageIndex) -> list[Manifest]:
    """The family of ``session_id``, its top first, depth-first (manifests only: cheap).

    Raises:
        InvalidSessionId, SessionNotFound: as :func:`family_map`.
    """
    try:
        top = family_root(store, session_id, index)
    except SessionNotFound:
        lineage(store, validate_session_id(session_id))  # a manifest the scan skipped: its error
        raise
    return family_members(index, top)


def read_family(
    store: SessionStore, members: Iterable[Manifest], running: Collection[str] = ()
) -> dict[str, MemberTurns]:
    """Every member's turns (the slow part: one projection read each; off the UI thread)."""
    turns = {m.session_id: read_member(store, m) for m in members}
    for member_id in set(running) & turns.keys():
        member = turns[member_id]
        if member.open_turn is None and member.turns and member.turns[-1][2] is None:
            turns[member_id] = _with_open(member)
    return turns


def _with_open(member: MemberTurns) -> MemberTurns:
    return MemberTurns(member.turns, member.own_from, member.turns[-1][0], member.merges, False)


def build_map(members: list[Manifest], turns: dict[str, MemberTurns]) -> FamilyMap:
    """Nodes and edges from the members (depth-first, the top first) and their turns.

    Pure: the CLI, the server and the desktop host read differently and
    share this. Labels are the one rule's (:func:`~branchwise.core.conversation.names.label_of`),
    rendered in the active language; a root's label is ``""``.
    """
    by_id = {m.session_id: m for m in members}
    siblings: dict[str, list[Manifest]] = {}
    for manifest in members:
        if manifest.parent is not None:
            siblings.setdefault(manifest.parent.session_id, []).append(manifest)
    own: dict[str, dict[str, int]] = {}
    first_own: dict[str, int] = {}
    nodes: list[MapNode] = []
    edges: list[MapEdge] = []
    for manifest in members:
        member = turns.get(manifest.session_id, MemberTurns(damaged=True))
        sid = manifest.session_id
        own_turns = member.turns[member.own_from :]
        start = member.own_from + 1
        if not member.turns and manifest.parent is not None:
            start = _inherited_count(manifest, by_id, first_own, own) + 1
        first_own[sid] = start
        own[sid] = {turn_id: start + i for i, (turn_id, _s, _b) in enumerate(own_turns)}
        link = manifest.parent
        fork_turn: int | None = None
        if link is not None and link.session_id in by_id and sid != members[0].session_id:
            source = _turn_owner(link.session_id, link.turn_id, by_id, own, first_own)
            edges.append(MapEdge(source, (sid, start), _edge_kind_of(manifest)))
            fork_turn = source[1] + (1 if link.origin is not None else 0)
        if manifest.fork_turn_index is not None:
            fork_turn = manifest.fork_turn_index
        found = label_of(manifest, siblings.get(link.session_id, ()) if link else ())
        label, title = render_label(found, fork_turn) or "", manifest.title
        if not own_turns:
            placeholder: NodeKind = "damaged" if member.damaged else "empty"
            nodes.append(MapNode(sid, start, None, label, title, placeholder))
            continue
        for i, (turn_id, _start, _boundary) in enumerate(own_turns):
            node_kind: NodeKind = "turn"
            if member.damaged:
                node_kind = "damaged"
            elif turn_id == member.open_turn:
                node_kind = "running"
            nodes.append(MapNode(sid, start + i, turn_id, label, title, node_kind))
    for manifest in members:
        merged_into = turns.get(manifest.session_id)
        if merged_into is None:
            continue
        for child_id, boundary, seq in merged_into.merges:
            child = turns.get(child_id)
            if child is None or child_id not in by_id:
                continue  # a branch no longer in the family (in the Trash)
            source = _merged_turn(child_id, child, boundary, first_own)
            target_turn = _turn_before(merged_into, seq)
            target = _turn_owner(manifest.session_id, target_turn, by_id, own, first_own)
            edges.append(MapEdge(source, target, "merge"))
    return FamilyMap(members[0].session_id, tuple(nodes), tuple(edges))


def _edge_kind_of(manifest: Manifest) -> EdgeKind:
    link = manifest.parent
    if link is not None and link.kind == "child":
        return "child"
    if link is not None and link.origin is not None:
        return "edit" if link.origin.kind == "edit" else "regenerate"
    return "fork"


def _inherited_count(
    manifest: Manifest,
    by_id: dict[str, Manifest],
    first_own: dict[str, int],
    own: dict[str, dict[str, int]],
) -> int:
    """How many turns an unreadable (or turnless) member inherited: its fork turn's number."""
    link = manifest.parent
    if link is None or link.kind == "child" or link.turn_id is None:
        return 0
    source = _turn_owner(link.session_id, link.turn_id, by_id, own, first_own)
    return source[1]


def _turn_owner(
    session_id: str,
    turn_id: str | None,
    by_id: dict[str, Manifest],
    own: dict[str, dict[str, int]],
    first_own: dict[str, int],
) -> tuple[str, int]:
    """The node of ``turn_id`` as ``session_id`` sees it: the ancestor that wrote it.

    ``None`` (before the first turn) is turn 0 of the member that owns turn 1.
    A turn found nowhere (a damaged log) stays on ``session_id`` itself.
    """
    current: str | None = session_id
    seen: set[str] = set()
    while current is not None and current in by_id and current not in seen:
        seen.add(current)
        if turn_id is None:
            if first_own.get(current, 1) <= 1:
                return (current, 0)
        elif turn_id in own.get(current, {}):
            return (current, own[current][turn_id])
        link = by_id[current].parent
        if link is None or link.kind == "child":
            break
        current = link.session_id
    return (session_id, 0 if turn_id is None else max(first_own.get(session_id, 1) - 1, 0))


def _merged_turn(
    child_id: str, child: MemberTurns, boundary: int, first_own: dict[str, int]
) -> tuple[str, int]:
    """The branch's own turn that was brought back: the last one closed by ``boundary``."""
    best = first_own[child_id]
    for i, (_turn, _start, closed) in enumerate(child.turns[child.own_from :]):
        if closed is not None and closed <= boundary:
            best = first_own[child_id] + i
    return (child_id, best)


def _turn_before(member: MemberTurns, seq: int) -> str | None:
    """The turn a merge at ``seq`` follows (the last one started before it)."""
    found = None
    for turn_id, start, _boundary in member.turns:
        if start < seq:
            found = turn_id
    return found


def family_map_json(store: SessionStore, session_id: str) -> dict[str, Any]:
    """The ``session map`` answer (the CLI's and ``GET /sessions/{id}/map``)."""
    return family_map(store, session_id).to_json()
