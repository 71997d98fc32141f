"""The Trash: deleting a conversation moves its folder aside, whole; restoring moves it back.

A trashed session is the very folder it was, moved from
``<root>/sessions/<id>/`` to ``<root>/trash/<id>/`` by one ``rename`` (both
folders fsynced), with one extra file, ``trashed.json``
(``{"format": 1, "trashedAt": <Unix seconds>}``), written atomically into it
just before the move. Why a move and not a flag in the manifest: every reader
of ``sessions/`` (listing, forking, search, lineage, the sidebar) stops seeing
a trashed session without knowing the Trash exists, and nothing of it is
rewritten, so restoring gives back the same bytes.

Crash safety:

* The move is one rename, so a session is either live or trashed, never
  both and never half of either; the Trash entry *is* the session folder, so
  there is no entry without its session.
* A crash between writing ``trashed.json`` and the rename leaves a live
  session holding a stale marker, which nothing reads there (the next trash
  rewrites it; a restore removes it).
* Purging renames the folder to a dot-name (``trash/.purge-<id>-<token>``),
  fsyncs, then removes it; :meth:`Trash.sweep` finishes a purge a crash cut
  short. A dot-name is never listed or restored.

Branches never break: a fork copies its prefix and hard-links blobs, so a
parent's trash or purge leaves every child whole; ``lineage`` names a trashed
parent with the code ``trashed``. A fork racing a delete either read the
source before the move (and completes whole) or finds it gone
(``source_not_found``).

A session being written by another process (its writer lease is held) is
refused with ``lease_held``: the lease is taken for the move, so no writer can
open the session halfway through it. The desktop stops its own turn first.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from branchwise.core.errors import (
    BranchwiseError,
    NotTrashed,
    SessionExists,
    SessionNotFound,
    SessionTrashed,
)
from branchwise.core.fs.atomic import (
    atomic_write_bytes,
    disk_full_as_typed,
    fsync_dir,
    refusing_read_only,
)
from branchwise.core.fs.locks import WriterLease
from branchwise.core.fs.safe_open import read_no_follow, refuse_link
from branchwise.core.ids import validate_session_id
from branchwise.core.store.manifest import load_manifest
from branchwise.core.store.store import SessionStore

TRASH_FOLDER = "trash"
MARKER = "trashed.json"
MARKER_FORMAT = 1
PURGE_PREFIX = ".purge-"


@dataclass(frozen=True, slots=True)
class TrashedSession:
    """One conversation in the Trash, as ``session trash`` lists it.

    Attributes:
        session_id: the session's id (unchanged by the move).
        title: its title from the manifest (``""`` when the manifest is damaged).
        kind: ``root``, ``fork`` or ``child`` (``None`` when the manifest is damaged).
        parent_session_id: the parent it was branched from, if any.
        created_at: when it was created (``None`` when the manifest is damaged).
        trashed_at: when it was moved to the Trash (Unix seconds).
    """

    session_id: str
    title: str
    kind: str | None
    parent_session_id: str | None
    created_at: float | None
    trashed_at: float

    def to_json(self) -> dict[str, Any]:
        """``{"sessionId", "title", "kind", "parentSessionId", "createdAt", "trashedAt"}``."""
        return {
            "sessionId": self.session_id,
            "title": self.title,
            "kind": self.kind,
            "parentSessionId": self.parent_session_id,
            "createdAt": self.created_at,
            "trashedAt": self.trashed_at,
        }


class Trash:
    """The Trash of one data root (``<root>/trash/``, created 0700 on first use).

    Args:
        store: the sessions the Trash takes from and gives back to.
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.folder = store.root / TRASH_FOLDER

    # -- paths -------------------------------------------------------------

    def session_dir(self, session_id: str) -> Path:
        """Where a trashed session lives (the id is validated first).

        Raises:
            InvalidSessionId: not a session id.
            UnsafePath: ``trash/`` or the session's folder in it is a symbolic link.
        """
        directory = self.folder / validate_session_id(session_id)
        refuse_link(self.folder)
        refuse_link(directory)
        return directory

    def contains(self, session_id: str) -> bool:
        """Whether the session is in the Trash."""
        return os.path.isdir(self.session_dir(session_id))

    def _is_live(self, session_id: str) -> bool:
        return os.path.isdir(self.store.session_dir(session_id))

    # -- moving --------------------------------------------------------------

    def trash(self, session_id: str) -> TrashedSession:
        """Move a live session to the Trash (one rename; the session stays whole).

        A session whose manifest is damaged can be trashed too (it is listed
        with an empty title).

        Raises:
            InvalidSessionId: not a session id.
            SessionTrashed: it is already in the Trash.
            SessionNotFound: no such session.
            LeaseHeld: another writer (a running turn elsewhere) holds the session.
            SessionExists: the Trash already holds a folder of that id (never overwritten).
            ReadOnlyDataFolder, DiskFull: nothing was moved.
        """
        session_id = validate_session_id(session_id)
        live = self.store.session_dir(session_id)
        if not self._is_live(session_id):
            if self.contains(session_id):
                raise SessionTrashed(f"session {session_id} is in the Trash", sessionId=session_id)
            raise SessionNotFound(f"no session {session_id}", sessionId=session_id)
        self.store.require_writable()
        target = self.session_dir(session_id)
        if os.path.lexists(target):
            raise SessionExists(
                f"the Trash already holds a session {session_id}", sessionId=session_id
            )
        lease = WriterLease(live, session_id)
        trashed_at = time.time()
        try:
            with (
                refusing_read_only(self.store.root),
                disk_full_as_typed(
                    f"the disk is full: session {session_id} was not moved to the Trash",
                    sessionId=session_id,
                ),
            ):
                self._ensure_folder()
                marker = {"format": MARKER_FORMAT, "trashedAt": trashed_at}
                atomic_write_bytes(live / MARKER, orjson.dumps(marker))
                try:
                    os.rename(live, target)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(live / MARKER)
                    raise
                fsync_dir(self.store.sessions_dir)
                fsync_dir(self.folder)
        finally:
            lease.release()
        return self._entry(target, session_id, trashed_at)

    def restore(self, session_id: str) -> None:
        """Move a trashed session back to the session list, unchanged.

        Raises:
            InvalidSessionId: not a session id.
            NotTrashed: the session is live, not in the Trash.
            SessionNotFound: no such session, live or trashed.
            SessionExists: a live session of that id exists (never overwritten).
            ReadOnlyDataFolder, DiskFull: nothing was moved.
        """
        session_id = validate_session_id(session_id)
        target = self.session_dir(session_id)
        live = self.store.session_dir(session_id)
        if not os.path.isdir(target):
            if self._is_live(session_id):
                raise NotTrashed(f"session {session_id} is not in the Trash", sessionId=session_id)
            raise SessionNotFound(f"no session {session_id}", sessionId=session_id)
        if os.path.lexists(live):
            raise SessionExists(f"session {session_id} already exists", sessionId=session_id)
        self.store.require_writable()
        with (
            refusing_read_only(self.store.root),
            disk_full_as_typed(
                f"the disk is full: session {session_id} was not restored", sessionId=session_id
            ),
        ):
            os.rename(target, live)
            fsync_dir(self.folder)
            fsync_dir(self.store.sessions_dir)
        # A stale marker in a live session is read by nothing; removing it is tidiness.
        with contextlib.suppress(OSError):
            os.unlink(live / MARKER)
            fsync_dir(live)

    def purge(self, session_id: str) -> None:
        """Delete a trashed session for good (its branches keep their own copies).

        Raises:
            InvalidSessionId: not a session id.
            NotTrashed: the session is live (trash it first).
            SessionNotFound: no such session, live or trashed.
            ReadOnlyDataFolder: the Trash cannot be written.
        """
        session_id = validate_session_id(session_id)
        target = self.session_dir(session_id)
        if not os.path.isdir(target):
            if self._is_live(session_id):
                raise NotTrashed(f"session {session_id} is not in the Trash", sessionId=session_id)
            raise SessionNotFound(f"no session {session_id}", sessionId=session_id)
        doomed = self.folder / f"{PURGE_PREFIX}{session_id}-{secrets.token_hex(4)}"
        with refusing_read_only(self.folder):
            os.rename(target, doomed)
            fsync_dir(self.folder)
        shutil.rmtree(doomed, ignore_errors=True)

    def empty(self) -> list[str]:
        """Purge everything in the Trash; the purged ids, most recently trashed first."""
        purged = []
        for entry in self.entries():
            try:
                self.purge(entry.session_id)
            except SessionNotFound:
                continue  # another process purged or restored it meanwhile
            purged.append(entry.session_id)
        return purged

    def sweep(self) -> list[str]:
        """Finish purges a crash interrupted (``trash/.purge-*``); return their names."""
        swept: list[str] = []
        try:
            entries = os.scandir(self.folder)
        except (FileNotFoundError, NotADirectoryError):
            return swept
        with entries:
            for entry in entries:
                if entry.name.startswith(PURGE_PREFIX) and entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                    swept.append(entry.name)
        return swept

    # -- reading ---------------------------------------------------------------

    def entries(self) -> list[TrashedSession]:
        """Everything in the Trash, most recently trashed first (no log is read)."""
        refuse_link(self.folder)
        found: list[TrashedSession] = []
        try:
            entries = os.scandir(self.folder)
        except (FileNotFoundError, NotADirectoryError):
            return found
        with entries:
            for entry in entries:
                if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                    continue
                try:
                    validate_session_id(entry.name)
                except BranchwiseError:
                    continue
                found.append(self._entry(Path(entry.path), entry.name, None))
        return sorted(found, key=lambda e: (e.trashed_at, e.session_id), reverse=True)

    def _entry(self, directory: Path, session_id: str, trashed_at: float | None) -> TrashedSession:
        """Describe one trashed folder from its manifest and marker (both may be damaged)."""
        if trashed_at is None:
            trashed_at = _marker_time(directory)
        try:
            manifest = load_manifest(directory)
        except BranchwiseError:
            return TrashedSession(session_id, "", None, None, None, trashed_at)
        return TrashedSession(
            session_id,
            manifest.title,
            manifest.kind,
            manifest.parent.session_id if manifest.parent else None,
            manifest.created_at,
            trashed_at,
        )

    def _ensure_folder(self) -> None:
        if not os.path.isdir(self.folder):
            self.folder.mkdir(mode=0o700, exist_ok=True)
            fsync_dir(self.store.root)


def _marker_time(directory: Path) -> float:
    """``trashedAt`` from the marker; the folder's change time if the marker is unusable."""
    try:
        value = orjson.loads(read_no_follow(directory / MARKER)).get("trashedAt")
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    except (OSError, orjson.JSONDecodeError, AttributeError, BranchwiseError):
        pass
    return os.stat(directory, follow_symlinks=False).st_ctime


def parent_state(store: SessionStore, parent_id: str) -> str:
    """Where a parent is: ``present`` (live), ``trashed`` or ``missing`` (purged or damaged)."""
    if store.exists(parent_id):
        return "present"
    if Trash(store).contains(parent_id):
        return "trashed"
    return "missing"
