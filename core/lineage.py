"""Child sessions, lineage, tree and forest, and the host's lineage index.

A child does not inherit history: it starts empty and is tied to its parent
by one ``session/child`` link event written, identically, into both logs.
Relations are also in every manifest (``parent``, ``rootSessionId``), so
walking them never reads a log: ``lineage`` follows parent links upward with
cycle detection; :class:`LineageIndex` indexes one scan of all manifests by
parent, and ``tree``, ``forest`` and the desktop sidebar grow their trees
from it with one iterative algorithm, so a fork chain of any depth works.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from branchwise.core.errors import (
    BranchwiseError,
    DuplicateChild,
    InvalidManifest,
    InvalidSpawnedFrom,
    LineageCycle,
    SessionExists,
    SessionNotFound,
    UnknownTurn,
    WrongParentWriter,
)
from branchwise.core.ids import new_session_id, validate_session_id
from branchwise.core.projection.events import session_child, session_created, validate_event
from branchwise.core.store.manifest import BranchLabel, Manifest, ParentLink, load_manifest
from branchwise.core.store.publish import encode_commits, publish_new_session
from branchwise.core.store.store import SessionStore, SessionWriter
from branchwise.core.store.trash import Trash

# -- child sessions -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChildResult:
    """A created child session and the link event both logs hold.

    Attributes:
        child_session_id: the new child.
        parent_session_id: its parent.
        root_session_id: the root of the parent's lineage (and now the child's).
        spawned_from: ``{"turnId": …, "toolCallId"?: …}``.
    """

    child_session_id: str
    parent_session_id: str
    root_session_id: str
    spawned_from: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """camelCase form for the CLI."""
        return {
            "childSessionId": self.child_session_id,
            "parentSessionId": self.parent_session_id,
            "rootSessionId": self.root_session_id,
            "spawnedFrom": self.spawned_from,
        }


def _spawned_from(value: Mapping[str, Any] | None) -> dict[str, Any]:
    value = dict(value or {})
    unknown = set(value) - {"turnId", "toolCallId"}
    turn, call = value.get("turnId"), value.get("toolCallId")
    if unknown or not (turn is None or isinstance(turn, str)):
        raise InvalidSpawnedFrom("spawnedFrom takes turnId and toolCallId only")
    if not (call is None or isinstance(call, str)):
        raise InvalidSpawnedFrom("spawnedFrom.toolCallId must be a string")
    spawned: dict[str, Any] = {"turnId": turn}
    if call is not None:
        spawned["toolCallId"] = call
    return spawned


def create_child(
    store: SessionStore,
    parent_id: str,
    spawned_from: Mapping[str, Any] | None,
    title: str,
    *,
    parent_writer: SessionWriter | None = None,
    child_id: str | None = None,
) -> ChildResult:
    """Start a child session of ``parent_id`` and link the two with one event in each log.

    Writing into the parent needs the parent's writer. A caller that already
    holds it (the host running the parent's turn) passes it as
    ``parent_writer``; otherwise this opens one for the duration, which
    fails with ``LeaseHeld`` — before anything is created — when another
    writer (this or another process) holds the parent. Opening it recovers
    the parent like any writer does (a turn a crash left open is closed as
    ``interrupted``).

    The child is published first, whole, with its link event; then the link
    is committed to the parent. A crash between the two leaves a child whose
    manifest and log name the parent (so ``tree`` shows it) while the
    parent's log lacks the link; never a parent pointing at nothing.

    Raises:
        InvalidSessionId: ``parent_id`` or ``child_id`` (``""`` included) is malformed.
        SessionNotFound: no such parent.
        LeaseHeld: the parent is being written elsewhere.
        UnknownTurn: ``spawned_from.turnId`` is not a turn of the parent.
        DuplicateChild: ``child_id`` is already taken.
    """
    validate_session_id(parent_id)
    # Only None asks for a generated id: an empty one is a malformed id, refused as such.
    child_id = new_session_id() if child_id is None else validate_session_id(child_id)
    spawned = _spawned_from(spawned_from)
    if parent_writer is not None and parent_writer.session_id != parent_id:
        raise WrongParentWriter(
            f"the writer given is for {parent_writer.session_id}, not {parent_id}",
            sessionId=parent_id,
        )
    if store.exists(child_id):
        raise DuplicateChild(f"session {child_id} already exists", sessionId=child_id)
    writer = parent_writer or store.open_writer(parent_id)
    try:
        turn_id = spawned["turnId"]
        if turn_id is not None and writer.projection.turn(turn_id) is None:
            raise UnknownTurn(f"session {parent_id} has no turn {turn_id}", turnId=turn_id)
        root_id = writer.manifest.root_session_id or parent_id
        link = validate_event(
            session_child(
                parent_session_id=parent_id,
                child_session_id=child_id,
                root_session_id=root_id,
                spawned_from=spawned,
            )
        )
        turns = [turn.turn_id for turn in writer.projection.turns]
        manifest = Manifest(
            session_id=child_id,
            title=title,
            kind="child",
            created_at=time.time(),
            parent=ParentLink(parent_id, "child", turn_id=turn_id),
            root_session_id=root_id,
            label=BranchLabel("child"),
            fork_turn_index=turns.index(turn_id) + 1 if turn_id in turns else 0,
        )
        log = encode_commits([[session_created(title, "child")], [link]])
        try:
            publish_new_session(store, manifest, log)
        except SessionExists as exc:
            raise DuplicateChild(exc.message, sessionId=child_id) from exc
        writer.commit([dict(link)])
    finally:
        if parent_writer is None:
            writer.close()
    return ChildResult(child_id, parent_id, root_id, spawned)


# -- lineage (upward) ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lineage:
    """A session and its ancestors, nearest first.

    Attributes:
        session_id: where the walk started.
        chain: manifests from the session itself up to the furthest ancestor read.
        broken: an ancestor that could not be read (``{"sessionId", "code"}``), if any;
            then the chain ends below it and ``root_session_id`` is unknown. A
            parent in the Trash is ``{"sessionId", "code": "trashed", "title"}``.
    """

    session_id: str
    chain: tuple[Manifest, ...]
    broken: dict[str, Any] | None = None

    @property
    def root_session_id(self) -> str | None:
        """The root reached, if the walk reached one."""
        return None if self.broken else self.chain[-1].session_id

    def to_json(self) -> dict[str, Any]:
        """camelCase form for the CLI."""
        return {
            "sessionId": self.session_id,
            "rootSessionId": self.root_session_id,
            "complete": self.broken is None,
            "broken": self.broken,
            "lineage": [_summary(manifest) for manifest in self.chain],
        }


def _summary(manifest: Manifest) -> dict[str, Any]:
    return {
        "sessionId": manifest.session_id,
        "title": manifest.title,
        "kind": manifest.kind,
        "createdAt": manifest.created_at,
        "parent": manifest.parent.to_json() if manifest.parent else None,
    }


def lineage(store: SessionStore, session_id: str) -> Lineage:
    """Walk parent links from ``session_id`` to its root.

    A missing or unreadable ancestor ends the walk (reported in ``broken``);
    a loop ends it with ``LineageCycle``. Never more steps than sessions exist.

    Raises:
        SessionNotFound: ``session_id`` itself does not exist.
        LineageCycle: the parent links loop.
    """
    chain = [load_manifest(store.session_dir(session_id))]
    seen = {session_id}
    while (link := chain[-1].parent) is not None:
        parent_id = link.session_id
        if parent_id in seen:
            raise LineageCycle(
                f"the lineage of {session_id} loops back to {parent_id}",
                sessionId=session_id,
                cycle=[m.session_id for m in chain] + [parent_id],
            )
        seen.add(parent_id)
        try:
            chain.append(load_manifest(store.session_dir(parent_id)))
        except (SessionNotFound, InvalidManifest) as exc:
            return Lineage(session_id, tuple(chain), _broken_link(store, parent_id, exc))
    return Lineage(session_id, tuple(chain))


def _broken_link(store: SessionStore, parent_id: str, exc: BranchwiseError) -> dict[str, Any]:
    """Why the walk stopped: a parent in the Trash is ``trashed`` (with its title), else the error.

    A deleted conversation's branches stay whole; this is where they show it.
    """
    trash = Trash(store)
    if not trash.contains(parent_id):
        return {"sessionId": parent_id, "code": exc.code}
    try:
        title = load_manifest(trash.session_dir(parent_id)).title
    except BranchwiseError:
        title = ""
    return {"sessionId": parent_id, "code": "trashed", "title": title}


# -- the tree (downward) ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TreeNode:
    """One session in a lineage tree and its forks and children, in the forest's order."""

    manifest: Manifest
    children: tuple[TreeNode, ...] = field(default=())

    def walk(self) -> Iterator[tuple[TreeNode, int]]:
        """Every node with its depth, depth-first in order (no recursion)."""
        stack: list[tuple[TreeNode, int]] = [(self, 0)]
        while stack:
            node, depth = stack.pop()
            yield node, depth
            stack.extend((child, depth + 1) for child in reversed(node.children))

    def to_json(self) -> dict[str, Any]:
        """A flat, depth-first list (a fork chain may be deeper than JSON nesting allows)."""
        sessions = []
        for node, depth in self.walk():
            entry = _summary(node.manifest)
            entry["depth"] = depth
            entry["childSessionIds"] = [c.manifest.session_id for c in node.children]
            sessions.append(entry)
        return {"rootSessionId": self.manifest.session_id, "sessions": sessions}


def creation_order(manifest: Manifest) -> tuple[float, str]:
    """The order of siblings and of top-level sessions: creation time, then id."""
    return (manifest.created_at, manifest.session_id)


ChildrenOf = Callable[[str], Sequence[Manifest]]


def _build(top: Manifest, children_of: ChildrenOf, placed: set[str]) -> TreeNode:
    """The subtree under ``top``, each session once, built bottom-up without recursion.

    ``children_of`` gives a session's direct branches in the order wanted;
    ``placed`` holds every session some tree already shows (and gains this
    subtree's), so a damaged parent loop never repeats a node.
    """
    placed.add(top.session_id)
    order: list[tuple[Manifest, list[Manifest]]] = []
    stack = [top]
    while stack:
        manifest = stack.pop()
        below = [c for c in children_of(manifest.session_id) if c.session_id not in placed]
        placed.update(c.session_id for c in below)
        order.append((manifest, below))
        stack.extend(below)
    # A node comes after its parent in ``order``, so going backwards builds children first.
    nodes: dict[str, TreeNode] = {}
    for manifest, below in reversed(order):
        nodes[manifest.session_id] = TreeNode(
            manifest, tuple(nodes.pop(c.session_id) for c in below)
        )
    return nodes[top.session_id]


def _grow_forest(ordered: Sequence[Manifest], children_of: ChildrenOf) -> list[TreeNode]:
    """The one forest algorithm (the CLI's and the sidebar's): iterative, any depth.

    ``ordered`` is every session in the wanted top-level order and
    ``children_of`` answers in the same order. Tops are the sessions without a
    parent or whose parent is gone; sessions caught in a damaged parent loop
    still appear after them, each loop under its first member in ``ordered``,
    so no session is ever hidden.
    """
    present = {m.session_id for m in ordered}
    placed: set[str] = set()
    tops = [m for m in ordered if m.parent is None or m.parent.session_id not in present]
    trees = [_build(top, children_of, placed) for top in tops]
    trees.extend(_build(m, children_of, placed) for m in ordered if m.session_id not in placed)
    return trees


@dataclass(slots=True)
class LineageIndex:
    """Manifests by id and by parent: one scan of the store, then kept up to date.

    The desktop host owns one (built at start, updated with :meth:`put` as it
    creates, renames and forks sessions); ``tree`` and ``forest`` build a
    throwaway one from a single manifest scan. Both grow their trees with the
    same iterative algorithm.

    Attributes:
        by_id: every readable session's manifest.
        damaged: typed errors of manifests that could not be read.
    """

    by_id: dict[str, Manifest] = field(default_factory=dict)
    damaged: list[BranchwiseError] = field(default_factory=list)
    # parent id -> child ids, oldest first (kept sorted by ``put``)
    _children: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def build(cls, manifests: Iterable[Manifest | BranchwiseError]) -> LineageIndex:
        """Index a one-pass scan (``SessionStore.iter_manifests()``)."""
        index = cls()
        for item in manifests:
            if isinstance(item, Manifest):
                index.by_id[item.session_id] = item
            else:
                index.damaged.append(item)
        for manifest in sorted(index.by_id.values(), key=creation_order):
            if manifest.parent is not None:
                index._children.setdefault(manifest.parent.session_id, []).append(
                    manifest.session_id
                )
        return index

    def _age_of(self, session_id: str) -> tuple[float, str]:
        return creation_order(self.by_id[session_id])

    def put(self, manifest: Manifest) -> None:
        """Add or replace one manifest (created, renamed, forked)."""
        old = self.by_id.get(manifest.session_id)
        if old is not None and old.parent is not None:
            siblings = self._children.get(old.parent.session_id, [])
            if manifest.session_id in siblings:
                siblings.remove(manifest.session_id)
        self.by_id[manifest.session_id] = manifest
        if manifest.parent is not None:
            siblings = self._children.setdefault(manifest.parent.session_id, [])
            bisect.insort(siblings, manifest.session_id, key=self._age_of)

    def remove(self, session_id: str) -> None:
        """Forget one session (moved to the Trash); its branches become top-level."""
        old = self.by_id.pop(session_id, None)
        if old is not None and old.parent is not None:
            siblings = self._children.get(old.parent.session_id, [])
            if session_id in siblings:
                siblings.remove(session_id)

    def _oldest_first(self, session_id: str) -> list[Manifest]:
        return [self.by_id[i] for i in self._children.get(session_id, ())]

    def children(self, session_id: str) -> list[Manifest]:
        """Direct forks and children of a session, newest first."""
        return [self.by_id[i] for i in reversed(self._children.get(session_id, ()))]

    def roots(self) -> list[Manifest]:
        """Top-level sessions: roots, and sessions whose parent is gone, newest first."""
        found = [
            m
            for m in self.by_id.values()
            if m.parent is None or m.parent.session_id not in self.by_id
        ]
        return sorted(found, key=creation_order, reverse=True)

    def branches_at(self, session_id: str, turn_id: str) -> list[Manifest]:
        """Forks and children that start at one turn of a session, newest first.

        An edit or a regenerate of turn N forks at the end of turn N-1 but
        belongs to turn N: it is listed under the turn its origin names.
        """
        return [m for m in self.children(session_id) if _branch_turn(m) == turn_id]

    def turns_with_branches(self, session_id: str) -> set[str]:
        """The turns of a session that have at least one branch."""
        turns = {_branch_turn(m) for m in self.children(session_id)}
        return {turn for turn in turns if turn is not None}

    def forest(self, *, newest_first: bool = True) -> list[TreeNode]:
        """The whole forest (the sidebar's is newest first at every level), at any depth.

        A damaged manifest that makes a parent loop neither hangs it nor hides
        the sessions in the loop: whatever no top-level session reaches is
        listed at the top level too.
        """
        ordered = sorted(self.by_id.values(), key=creation_order, reverse=newest_first)
        return _grow_forest(ordered, self.children if newest_first else self._oldest_first)

    def __len__(self) -> int:
        return len(self.by_id)


def _branch_turn(manifest: Manifest) -> str | None:
    """The parent's turn a branch is listed under (an edit's or regenerate's own turn)."""
    parent = manifest.parent
    if parent is None:
        return None
    origin = parent.origin
    if origin is not None and origin.kind != "fanout":  # a fan-out's question is a new turn
        return origin.turn_id
    return parent.turn_id


def tree(store: SessionStore, session_id: str) -> TreeNode:
    """The whole descendant tree (forks and children) of ``session_id``, oldest first.

    One manifest scan; any depth.

    Raises:
        SessionNotFound: no such session.
    """
    validate_session_id(session_id)
    index = LineageIndex.build(store.iter_manifests())
    top = index.by_id.get(session_id)
    if top is None:
        load_manifest(store.session_dir(session_id))  # the precise error: missing or damaged
        raise SessionNotFound(f"no session {session_id}", sessionId=session_id)
    return _build(top, index._oldest_first, set())


def forest(store: SessionStore) -> list[TreeNode]:
    """Every session as one forest, oldest first, in one manifest scan (damaged ones left out).

    The same algorithm as the sidebar's :meth:`LineageIndex.forest`, in the
    other order.
    """
    return LineageIndex.build(store.iter_manifests()).forest(newest_first=False)
