"""The conversation list as a lineage forest, from one scan of the manifests.

The sidebar nests forks and children under their parents, newest first, and
a parent's turns show which branches start there. Both come from manifests
only (never a log), read once at start and then updated in place as the host
creates, renames and forks sessions, so start-up work is proportional to the
number of manifests, not to the size of any conversation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from branchwise.core.errors import BranchwiseError
from branchwise.core.manifest import Manifest


@dataclass(frozen=True, slots=True)
class LineageNode:
    """One session in the forest and its branches."""

    manifest: Manifest
    children: list[LineageNode]


@dataclass(slots=True)
class LineageIndex:
    """Manifests by id and by parent.

    Attributes:
        by_id: every readable session's manifest.
        damaged: typed errors of manifests that could not be read.
    """

    by_id: dict[str, Manifest] = field(default_factory=dict)
    damaged: list[BranchwiseError] = field(default_factory=list)
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
        for manifest in index.by_id.values():
            if manifest.parent is not None:
                index._children.setdefault(manifest.parent.session_id, []).append(
                    manifest.session_id
                )
        return index

    def put(self, manifest: Manifest) -> None:
        """Add or replace one manifest (created, renamed, forked)."""
        old = self.by_id.get(manifest.session_id)
        if old is not None and old.parent is not None:
            siblings = self._children.get(old.parent.session_id, [])
            if manifest.session_id in siblings:
                siblings.remove(manifest.session_id)
        self.by_id[manifest.session_id] = manifest
        if manifest.parent is not None:
            self._children.setdefault(manifest.parent.session_id, []).append(manifest.session_id)

    def _newest_first(self, ids: Iterable[str]) -> list[Manifest]:
        found = [self.by_id[i] for i in ids if i in self.by_id]
        return sorted(found, key=lambda m: (m.created_at, m.session_id), reverse=True)

    def roots(self) -> list[Manifest]:
        """Top-level sessions: roots, and sessions whose parent is gone."""
        return self._newest_first(
            m.session_id
            for m in self.by_id.values()
            if m.parent is None or m.parent.session_id not in self.by_id
        )

    def children(self, session_id: str) -> list[Manifest]:
        """Direct forks and children of a session, newest first."""
        return self._newest_first(self._children.get(session_id, ()))

    def branches_at(self, session_id: str, turn_id: str) -> list[Manifest]:
        """Forks and children that start at one turn of a session, newest first."""
        return [
            m
            for m in self.children(session_id)
            if m.parent is not None and m.parent.turn_id == turn_id
        ]

    def turns_with_branches(self, session_id: str) -> set[str]:
        """The turns of a session that have at least one branch."""
        return {
            m.parent.turn_id
            for m in self.children(session_id)
            if m.parent is not None and m.parent.turn_id is not None
        }

    def forest(self) -> list[LineageNode]:
        """The whole forest, newest first at every level.

        Walks with a visited set, so a damaged manifest that makes a parent
        cycle neither hangs it nor hides the sessions in the cycle: whatever a
        walk from the roots did not reach is listed at the top level.
        """
        seen: set[str] = set()

        def node(manifest: Manifest) -> LineageNode:
            seen.add(manifest.session_id)
            kids = [node(m) for m in self.children(manifest.session_id) if m.session_id not in seen]
            return LineageNode(manifest, kids)

        nodes = [node(m) for m in self.roots() if m.session_id not in seen]
        for manifest in self._newest_first(self.by_id):
            if manifest.session_id not in seen:
                nodes.append(node(manifest))
        return nodes

    def __len__(self) -> int:
        return len(self.by_id)
