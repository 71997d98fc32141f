"""Which attachment blobs the sessions of a data root refer to, and freeing the rest.

A blob may be freed only when no session refers to it: live ones, every
branch, and those in the Trash (a restore brings them back). The references
are read through each session's projection (the one reader of events). If
any session cannot be read, nobody can say what it refers to, so nothing
is freed at all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from branchwise.core.errors import BranchwiseError
from branchwise.core.log.scan import gc_paused
from branchwise.core.log.segments import scan_session_log
from branchwise.core.projection.projection import Projection
from branchwise.core.store.attachments import COLLECT_GRACE, BlobStore
from branchwise.core.store.manifest import load_manifest
from branchwise.core.store.store import SessionStore
from branchwise.core.store.trash import TRASH_FOLDER


@dataclass(frozen=True, slots=True)
class Collection:
    """What a collection pass did.

    Attributes:
        removed: the blobs (and temporary files) freed.
        kept: blobs still referenced.
        unreadable: sessions whose references could not be read (then nothing is freed).
    """

    removed: tuple[str, ...]
    kept: int
    unreadable: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        """``{"removed", "kept", "unreadable"}``."""
        return {
            "removed": list(self.removed),
            "kept": self.kept,
            "unreadable": list(self.unreadable),
        }


def _session_folders(store: SessionStore) -> list[Path]:
    folders: list[Path] = []
    for parent in (store.sessions_dir, store.root / TRASH_FOLDER):
        try:
            entries = sorted(os.scandir(parent), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False) and not entry.name.startswith("."):
                folders.append(Path(entry.path))
    return folders


def referenced_blobs(store: SessionStore) -> tuple[set[str], list[str]]:
    """Hashes every session (live or trashed) refers to; the folders that could not be read."""
    found: set[str] = set()
    unreadable: list[str] = []
    for folder in _session_folders(store):
        try:
            manifest = load_manifest(folder)
            with gc_paused():
                log = scan_session_log(folder, manifest)
                projection = Projection(seed_length=log.manifest.seed_length)
                for frame in log.scan.frames:
                    projection.apply(frame.events)
        except (BranchwiseError, OSError, KeyError, TypeError, ValueError):
            unreadable.append(folder.name)
            continue
        if log.scan.corruption is not None:
            unreadable.append(folder.name)
        found.update(ref.sha256 for ref in projection.attachment_refs())
    return found, unreadable


def collect_blobs(store: SessionStore, *, grace: float = COLLECT_GRACE) -> Collection:
    """Free every blob no session refers to (older than ``grace`` seconds).

    Run after a purge and by ``branchwise doctor --collect-attachments``.
    """
    blobs = BlobStore(store.root)
    if not blobs.directory.is_dir():
        return Collection((), 0, ())  # nothing was ever attached: no session to replay
    referenced, unreadable = referenced_blobs(store)
    if unreadable:
        return Collection((), len(referenced), tuple(unreadable))
    removed = blobs.collect(referenced, grace=grace)
    return Collection(tuple(removed), len(referenced), ())
