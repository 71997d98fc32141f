"""Upgrading a format-1 session (one ``events.log``) to format 2 (segments), crash-safely.

Under the writer lease: link ``events.log`` into ``log.tmp/`` as the first
segment (O(1), no byte copied), build its sidecars with one replay, fsync,
rename ``log.tmp`` to ``log``, fsync, save the format-2 manifest, unlink
``events.log``. The manifest is the commit point: before it, the session is a
valid format-1 session and a ``log.tmp``/``log`` left by a crash is redone
(it only holds a link and caches); after it, it is a valid format-2 session
and a stray ``events.log`` is removed by :func:`remove_leftovers` on the next
writer open. Readers never see a half-migrated log, since the virtual log of
both formats is the same bytes (the first segment *is* ``events.log``'s inode).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any

from branchwise.core.fs.atomic import fsync_dir
from branchwise.core.fs.safe_open import open_no_follow, refuse_link
from branchwise.core.log.scan import gc_paused
from branchwise.core.log.segments import LEGACY_LOG, scan_session_log, segment_name
from branchwise.core.log.sidecars import sidecar_entries, write_sidecars
from branchwise.core.projection.turns import TurnTracker
from branchwise.core.store.manifest import DEFAULT_LOG_DIR, SEGMENTED, Manifest, save_manifest

MIGRATION_DIR = "log.tmp"


def migrate_locked(directory: Path, manifest: Manifest) -> Manifest:
    """Upgrade a format-1 session whose lease the caller holds; return the new manifest.

    Raises:
        CorruptLog: the log is corrupt (nothing is changed; a torn tail is
            kept, and the next writer cuts it from the segment).
        UnsafePath: ``events.log`` is a symbolic link.
    """
    if manifest.segmented:
        return manifest
    with gc_paused():
        log = scan_session_log(directory, manifest)
    if log.scan.corruption is not None:
        raise log.scan.corruption
    events = directory / LEGACY_LOG
    refuse_link(events)
    building, final = directory / MIGRATION_DIR, directory / DEFAULT_LOG_DIR
    for leftover in (building, final):  # a format-1 manifest: anything here is a crash's
        shutil.rmtree(leftover, ignore_errors=True)
    building.mkdir(mode=0o700)
    first = building / segment_name(1, 1)
    try:
        os.link(events, first)
    except FileNotFoundError:
        os.close(open_no_follow(first, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    with gc_paused():
        entries = list(sidecar_entries(log.scan.frames, TurnTracker(), log.data, 0))
    write_sidecars(first, entries, sync_segment=True)  # events.log may hold unsynced frames
    fsync_dir(building)
    os.rename(building, final)
    fsync_dir(directory)
    upgraded = manifest.with_changes(format=SEGMENTED, seed=(), log_dir=DEFAULT_LOG_DIR)
    save_manifest(directory, upgraded)
    remove_leftovers(directory, upgraded)
    return upgraded


def remove_leftovers(directory: Path, manifest: Manifest) -> bool:
    """Remove what a crash left beside a format-2 session's log (best effort).

    A stray ``events.log`` (a migration killed after its manifest), an
    unfinished ``log.tmp``, and log folders a replace no longer points at.
    Returns whether a stray ``events.log`` was removed: the last step of a
    migration, finished now.
    """
    if not manifest.segmented:
        return False
    removed = finished = False
    with contextlib.suppress(FileNotFoundError):
        os.unlink(directory / LEGACY_LOG)
        removed = finished = True
    with os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            if name == manifest.log_dir or not (name == MIGRATION_DIR or name.startswith("log")):
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed = True
    if removed:
        with contextlib.suppress(OSError):
            fsync_dir(directory)
    return finished


def unfinished_migration(directory: Path, manifest: Manifest) -> dict[str, Any] | None:
    """A ``verify`` finding for a stray ``events.log`` beside a format-2 log (``None``: none).

    A migration killed after its manifest leaves ``events.log`` as a second
    link of the first segment: every reader ignores it, but link counts see a
    shared segment that is not shared. Verify names the step instead of taking it.
    """
    if not manifest.segmented:
        return None
    try:
        stray = os.lstat(directory / LEGACY_LOG)
    except FileNotFoundError:
        return None
    first = directory / manifest.log_dir / segment_name(1, 1)
    try:
        segment = os.lstat(first)
        linked = (segment.st_dev, segment.st_ino) == (stray.st_dev, stray.st_ino)
    except FileNotFoundError:
        linked = False
    how = f"a second link of {manifest.log_dir}/{first.name}" if linked else "left beside the log"
    return {
        "code": "migration_unfinished",
        "message": f"a migration to format 2 stopped before its last step: {LEGACY_LOG} is "
        f"{how}; `session migrate` or the next writer removes it",
        "file": LEGACY_LOG,
    }
