"""Pruning: a conversation and every branch below it to the Trash, as one action.

Deleting a conversation alone leaves its branches whole (they become
top-level). Pruning takes the whole subtree instead: the branches of
branches, child conversations, everything the lineage index files under it.
It is one action for the user: every member is checked before anything
moves (one being written elsewhere refuses the whole prune with
``lease_held``), members move leaves first (a crash part-way leaves the top
still in the list, and what moved is in the Trash, whole), a failure
part-way moves back what had moved, and :func:`restore_pruned` brings the
whole subtree back, parents first.
"""

from __future__ import annotations

import contextlib

from branchwise.core.errors import BranchwiseError, LeaseHeld, SessionNotFound, SessionTrashed
from branchwise.core.ids import validate_session_id
from branchwise.core.lineage import LineageIndex, TreeNode, _build
from branchwise.core.store.store import SessionStore
from branchwise.core.store.trash import Trash


def subtree(index: LineageIndex, session_id: str) -> list[str]:
    """``session_id`` and every descendant, parents before their branches (any depth).

    Raises:
        SessionNotFound: the index does not hold it.
    """
    top = index.by_id.get(session_id)
    if top is None:
        raise SessionNotFound(f"no session {session_id}", sessionId=session_id)
    tree: TreeNode = _build(top, index._oldest_first, set())
    return [node.manifest.session_id for node, _depth in tree.walk()]


def prune(
    store: SessionStore,
    session_id: str,
    *,
    index: LineageIndex | None = None,
    busy: frozenset[str] = frozenset(),
) -> list[str]:
    """Move ``session_id`` and all its branches to the Trash; the ids moved, leaves first.

    Args:
        index: the caller's lineage index (default: one manifest scan).
        busy: sessions the caller itself is still writing (refused like a lease held elsewhere).

    Raises:
        InvalidSessionId: a malformed id.
        SessionNotFound, SessionTrashed: no such live session.
        LeaseHeld: a member is being written (nothing moved).
        ReadOnlyDataFolder, DiskFull, …: as :meth:`Trash.trash` (what had moved is moved back).
    """
    validate_session_id(session_id)
    trash = Trash(store)
    if index is None:
        index = LineageIndex.build(store.iter_manifests())
    if session_id not in index.by_id:
        if trash.contains(session_id):
            raise SessionTrashed(f"session {session_id} is in the Trash", sessionId=session_id)
        store.manifest(session_id)  # the precise error
        raise SessionNotFound(f"no session {session_id}", sessionId=session_id)
    members = subtree(index, session_id)
    for member in members:
        if member in busy or store.is_being_written(member):
            raise LeaseHeld(
                f"session {member} is being written (a running turn?); stop it first",
                sessionId=member,
            )
    moved: list[str] = []
    try:
        for member in reversed(members):
            trash.trash(member)
            moved.append(member)
    except BranchwiseError:
        for member in reversed(moved):
            with contextlib.suppress(BranchwiseError):
                trash.restore(member)
        raise
    return moved


def restore_pruned(store: SessionStore, session_ids: list[str]) -> list[str]:
    """Undo :func:`prune`: restore ``session_ids`` (as it returned them) parents first.

    A member already restored (or purged) is skipped, so Undo after a partial
    manual restore brings back the rest. Returns the ids restored.
    """
    trash = Trash(store)
    restored = []
    for member in reversed(session_ids):
        if trash.contains(member):
            trash.restore(member)
            restored.append(member)
    return restored
