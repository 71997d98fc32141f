"""Deleting conversations from the desktop: to the Trash with Undo, restore, purge, empty.

Qt-free, so a headless driver (and the tests) use it as the window does.
Deleting a conversation this app has open stops its running turn first (the
turn is committed as ``cancelled`` and the writer released), then moves the
folder with :class:`~branchwise.core.store.trash.Trash`; a conversation
another process is writing is refused with ``lease_held``. Every outcome
and refusal is a notice: a deletion's notice carries the Undo action
(``restore_session``). The lineage index forgets a trashed conversation, so
its branches show at the top level, whole; the search index drops it on its
next catch-up.

"Move to Trash with its branches" (:meth:`Trashing.delete_with_branches`)
takes the conversation and its whole subtree in one action
(:func:`~branchwise.core.conversation.prune.prune`): one notice, and its Undo
restores every member.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from branchwise.core.conversation.prune import prune, restore_pruned, subtree
from branchwise.core.errors import BranchwiseError
from branchwise.core.lineage import LineageIndex
from branchwise.core.store.blob_collection import collect_blobs
from branchwise.core.store.store import SessionStore
from branchwise.core.store.trash import Trash, TrashedSession
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.notices import Level, NoticeAction, NoticeCenter

log = logging.getLogger(__name__)

RESTORE_ACTION = "restore_session"
"""The notice action that undoes a deletion."""


class TrashOwner(Protocol):
    """What the Trash needs of the host (the host itself, in the app)."""

    store: SessionStore
    notices: NoticeCenter

    @property
    def index(self) -> LineageIndex: ...

    def title(self, session_id: str) -> str: ...

    async def close_session(self, session_id: str) -> Changes: ...

    def emit(self, changes: Changes) -> Changes: ...

    def index_all_for_search(self) -> None: ...

    def index_for_search(self, session_id: str) -> None: ...


class Trashing:
    """The desktop's Trash operations; each reports its outcome as a notice.

    Args:
        owner: the host.
    """

    def __init__(self, owner: TrashOwner) -> None:
        self._owner = owner
        self.trash = Trash(owner.store)
        self._pruned: dict[str, list[str]] = {}

    def entries(self) -> list[TrashedSession]:
        """What the Trash holds, most recently deleted first (a damaged Trash: none)."""
        try:
            return self.trash.entries()
        except BranchwiseError as exc:
            self._refused(exc)
            return []

    async def delete(self, session_id: str) -> bool:
        """Stop the conversation's turn, close it, and move it to the Trash (with Undo)."""
        owner = self._owner
        title = owner.title(session_id)
        await owner.close_session(session_id)
        try:
            await asyncio.to_thread(self.trash.trash, session_id)
        except BranchwiseError as exc:
            self._refused(exc)
            return False
        owner.index.remove(session_id)
        owner.emit(Changes(sidebar=True))
        owner.notices.post(
            "conversation_trashed",
            Level.SUCCESS,
            title=title,
            action=NoticeAction(RESTORE_ACTION, session_id),
        )
        owner.index_all_for_search()  # forgets the trashed conversation
        return True

    def subtree(self, session_id: str) -> list[str]:
        """A conversation and every branch below it, as the list shows them now."""
        try:
            return subtree(self._owner.index, session_id)
        except BranchwiseError:
            return []

    async def delete_with_branches(self, session_id: str) -> bool:
        """Move a conversation and all its branches to the Trash: one notice, one Undo.

        Their turns are stopped and they are closed first; then the subtree
        moves as one (a member written by another process refuses it whole).
        """
        owner = self._owner
        title = owner.title(session_id)
        members = self.subtree(session_id)
        for member in members:
            await owner.close_session(member)
        # The worker reads its own copy: the index lives on the UI thread.
        snapshot = LineageIndex.build(owner.index.by_id.values())
        try:
            moved = await asyncio.to_thread(prune, owner.store, session_id, index=snapshot)
        except BranchwiseError as exc:
            self._refused(exc)
            return False
        for member in moved:
            owner.index.remove(member)
        self._pruned[session_id] = moved
        owner.emit(Changes(sidebar=True))
        owner.notices.post(
            "conversation_trashed_with_branches",
            Level.SUCCESS,
            title=title,
            action=NoticeAction(RESTORE_ACTION, session_id),
        )
        owner.index_all_for_search()
        return True

    async def restore(self, session_id: str) -> bool:
        """Move a conversation back from the Trash into the list (a prune's whole subtree)."""
        owner = self._owner
        pruned = self._pruned.pop(session_id, None)
        if pruned is not None:
            return await self._restore_pruned(session_id, pruned)
        try:
            await asyncio.to_thread(self.trash.restore, session_id)
            manifest = owner.store.manifest(session_id)
        except BranchwiseError as exc:
            self._refused(exc)
            return False
        owner.index.put(manifest)
        owner.emit(Changes(sidebar=True))
        owner.notices.post("conversation_restored", Level.SUCCESS, title=manifest.title)
        owner.index_for_search(session_id)
        return True

    async def _restore_pruned(self, session_id: str, members: list[str]) -> bool:
        owner = self._owner
        try:
            restored = await asyncio.to_thread(restore_pruned, owner.store, members)
            manifests = [owner.store.manifest(member) for member in restored]
        except BranchwiseError as exc:
            self._refused(exc)
            return False
        for manifest in manifests:
            owner.index.put(manifest)
        owner.emit(Changes(sidebar=True))
        title = next((m.title for m in manifests if m.session_id == session_id), "")
        owner.notices.post("conversation_restored", Level.SUCCESS, title=title)
        for manifest in manifests:
            owner.index_for_search(manifest.session_id)
        return True

    async def purge(self, session_id: str) -> bool:
        """Delete one trashed conversation for good (its branches keep their history)."""
        title = next((e.title for e in self.entries() if e.session_id == session_id), "")
        try:
            await asyncio.to_thread(self.trash.purge, session_id)
        except BranchwiseError as exc:
            self._refused(exc)
            return False
        self._owner.notices.post("conversation_purged", Level.SUCCESS, title=title)
        await self._free_attachments()
        return True

    async def empty(self) -> list[str]:
        """Delete everything in the Trash for good; the ids deleted."""
        try:
            await asyncio.to_thread(self.trash.sweep)
            purged = await asyncio.to_thread(self.trash.empty)
        except BranchwiseError as exc:
            self._refused(exc)
            return []
        self._owner.notices.post("trash_emptied", Level.SUCCESS)
        await self._free_attachments()
        return purged

    async def _free_attachments(self) -> None:
        """Free the attachments only the purged conversations referred to (in a worker thread).

        A failure frees nothing and is only logged: the blobs stay until a later pass.
        """
        try:
            await asyncio.to_thread(collect_blobs, self.trash.store)
        except (BranchwiseError, OSError) as exc:
            log.warning("attachments were not collected after a purge: %s", exc)

    def _refused(self, exc: BranchwiseError) -> None:
        self._owner.notices.post(exc.code, Level.ERROR, detail=exc.message, **exc.details)
