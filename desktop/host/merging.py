"""Bring a branch's conclusion back into its parent, from the desktop.

The core writes the ``session/merge`` commit (``core/conversation/merge.py``); this module
supplies what the window knows: the branch's own answers to choose from, a
summary written by the host's provider, and the parent's open writer when the
parent is open in this app (its lease is held here, so the merge must go
through it, and not while one of its turns runs). Merges go through the
pending-merge journal (:mod:`~branchwise.desktop.host.merge_journal`), so one
whose parent another process holds is written later, never lost or doubled.
"""

from __future__ import annotations

import asyncio
import time
from uuid import uuid4

from branchwise.core.conversation.merge import MergeResult, merge_back
from branchwise.core.errors import BranchwiseError, LeaseHeld, NotAncestor, TurnRunning
from branchwise.core.projection.projection import Projection
from branchwise.core.runtime import write_summary
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.merge_journal import MergeJournal, PendingMerge
from branchwise.desktop.host.notices import Level


def parent_of(host: Host, child_id: str) -> str | None:
    """The conversation a branch came from (``None``: not a branch)."""
    manifest = host.index.by_id.get(child_id)
    return manifest.parent.session_id if manifest and manifest.parent else None


def _projection(host: Host, child_id: str) -> Projection:
    session = host.session(child_id)
    projection = session.projection if session is not None else None
    return projection if projection is not None else host.store.read(child_id).projection


async def summarize(host: Host, child_id: str) -> str:
    """A summary of the branch since its fork point, by the host's provider.

    Raises:
        InvalidMerge: the branch has no turns of its own.
        ProviderError: the model failed.
    """
    return await write_summary(_projection(host, child_id), host.provider)


def bring_back(
    host: Host, child_id: str, content: str, kind: str, *, initiator: object = None
) -> MergeResult | None:
    """Append ``content`` to the branch's parent under a fresh operation id.

    The merge is journalled as pending before anything is written. When
    another process holds the parent it stays pending (``None`` is returned
    and a notice says so) and :func:`resume_merges` writes it later.

    Raises:
        TurnRunning: the parent is open here and answering (merge when it ends).
        NotAncestor: the branch has no parent any more.
        BranchwiseError: what ``merge_back`` refuses for good (empty, too long, trashed).
    """
    record = _pending(host, child_id, content, kind)
    try:
        result = _journalled(host, record)
    except LeaseHeld:
        host.notices.post("merge_pending", Level.INFO, title=host.title(record.parent_session_id))
        return None
    _written(host, record.parent_session_id, initiator)
    return result


async def merge(
    host: Host, child_id: str, content: str, kind: str, *, initiator: object = None
) -> MergeResult | None:
    """:func:`bring_back`, from the "Bring back" dialog: off the UI thread when it can be.

    A parent open for writing in this app is written through its writer, on
    the loop thread where its turns commit too (a writer serves one thread);
    any other parent is written from a worker thread. The changes name the
    ``initiator``.
    """
    record = _pending(host, child_id, content, kind)
    session = host.session(record.parent_session_id)
    try:
        if session is not None and session.writer is not None:
            result = _journalled(host, record)
        else:
            result = await asyncio.to_thread(_journalled, host, record)
    except LeaseHeld:
        host.notices.post("merge_pending", Level.INFO, title=host.title(record.parent_session_id))
        return None
    _written(host, record.parent_session_id, initiator)
    return result


def _pending(host: Host, child_id: str, content: str, kind: str) -> PendingMerge:
    """The merge to journal, refused at once when the parent cannot take one now."""
    parent_id = parent_of(host, child_id)
    if parent_id is None:
        raise NotAncestor(f"{child_id} has no parent to bring back to", sessionId=child_id)
    session = host.session(parent_id)
    if session is not None and session.running:
        raise TurnRunning("the parent conversation is answering", sessionId=parent_id)
    return PendingMerge(f"desktop-{uuid4().hex}", child_id, parent_id, content, kind, time.time())


def _journalled(host: Host, record: PendingMerge) -> MergeResult:
    """Journal the merge, write it, and drop the record (kept when the parent is held)."""
    journal = MergeJournal(host.root)
    journal.put(record)
    try:
        result = _commit(host, record)
    except LeaseHeld:
        raise  # the record stays: resume_merges writes it when the parent is free
    except BranchwiseError:
        journal.remove(record.operation_id)
        raise
    journal.remove(record.operation_id)
    return result


def resume_merges(host: Host) -> int:
    """Write the merges still pending (at start, and from time to time); how many were written.

    A merge whose parent is still held elsewhere or answering stays pending;
    one refused for good is dropped with a notice in its own words.
    """
    journal = MergeJournal(host.root)
    written = 0
    for record in journal.records():
        session = host.session(record.parent_session_id)
        if session is not None and session.running:
            continue
        try:
            _commit(host, record)
        except (LeaseHeld, TurnRunning):
            continue
        except BranchwiseError as exc:
            journal.remove(record.operation_id)
            host.notices.post(exc.code, Level.ERROR, detail=exc.message)
            continue
        journal.remove(record.operation_id)
        _written(host, record.parent_session_id)
        written += 1
        host.notices.post(
            "merge_written", Level.SUCCESS, title=host.title(record.parent_session_id)
        )
    return written


def _commit(host: Host, record: PendingMerge) -> MergeResult:
    """The merge itself, through the parent's writer when it is open here (any thread)."""
    session = host.session(record.parent_session_id)
    writer = session.writer if session is not None else None
    return merge_back(
        host.store,
        record.child_session_id,
        record.parent_session_id,
        record.content,
        record.kind,
        record.operation_id,
        writer=writer,
    )


def _written(host: Host, parent_id: str, initiator: object = None) -> None:
    """Show a written merge: the parent's rows, its search entries and every view (loop thread)."""
    session = host.session(parent_id)
    if session is not None:
        session.rebuild_rows()
    host.index_for_search(parent_id)
    host.emit(
        Changes(
            sessions=frozenset({parent_id}),
            transcripts=frozenset({parent_id}),
            initiator=initiator,
        )
    )
