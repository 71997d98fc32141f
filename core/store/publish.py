"""Writing a session's log as a whole, rather than appending to it.

Two cases: a brand-new session folder (a fork, a child) built under a
temporary name and published with one rename; and a replaced log, which
bumps the session's generation.

Generations are the fence that makes forks of a replaced log fail as stale.

A log is append-only except when a session is rewritten as a whole (a rewind
to an earlier point, a repair). Whatever replaces ``events.log`` bumps the
manifest's ``generation`` first, so a fork request carrying the generation it
saw is refused with ``stale_source`` instead of cutting a different history
at the same seq.

Order matters: the manifest is bumped *before* the log is replaced. A fork
reads the manifest, then the log, then the manifest again; if it read the new
log, the bump had already happened and its second read sees it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from branchwise.core.errors import DiskFull, SessionExists
from branchwise.core.fs.atomic import (
    disk_full_as_typed,
    fsync_dir,
    refusing_read_only,
    sync_filesystem,
    write_durably,
)
from branchwise.core.fs.locks import WriterLease
from branchwise.core.fs.safe_open import refuse_link
from branchwise.core.log.frames import encode_frame
from branchwise.core.log.scan import gc_paused, scan_bytes
from branchwise.core.log.segments import log_pieces, segment_name
from branchwise.core.log.sidecars import sidecar_entries, write_sidecars
from branchwise.core.projection.events import validate_event
from branchwise.core.projection.snapshot_cache import wait_for_snapshots
from branchwise.core.projection.turns import TurnTracker
from branchwise.core.store.manifest import Manifest, load_manifest, save_manifest
from branchwise.core.store.store import SessionStore, publish_dir

_BLOB_NAME = re.compile(r"[0-9a-f]{64}")


def encode_commits(commits: Iterable[list[dict[str, Any]]]) -> bytes:
    """Frames for ``commits``, seqs and commit numbers renumbered densely from 1.

    Stored events keep their ``ts``; new ones (validated first) get the current time.
    """
    frames = []
    seq, now = 0, time.time()
    for number, events in enumerate(commits, start=1):
        stamped = []
        for event in events:
            fields = {k: v for k, v in event.items() if k not in ("seq", "ts")}
            validate_event(fields)
            seq += 1
            stamped.append({"seq": seq, "ts": event.get("ts", now), **fields})
        frames.append(encode_frame(number, stamped))
    return b"".join(frames)


def replace_log(
    store: SessionStore, session_id: str, commits: Iterable[list[dict[str, Any]]]
) -> int:
    """Replace a session's whole log with ``commits`` (e.g. a rewind); return the new generation.

    Takes the writer lease for the duration, so it never races a writer.
    The new log is written and fsynced beside the old one, the generation is
    bumped, then the log is swapped in with one atomic rename.

    Raises:
        LeaseHeld: a writer (this or another process) holds the session.
    """
    directory = store.session_dir(session_id)
    data = encode_commits(commits)
    lease = WriterLease(directory, session_id)
    try:
        manifest = load_manifest(directory)
        if manifest.segmented:
            # A snapshot this process is still writing into the old folder would
            # keep it from being removed: let it finish first (it is then removed too).
            wait_for_snapshots()
            with refusing_read_only(directory):
                return _replace_segments(directory, manifest, data)
        # Refused as every writer does, though the rename below would not follow it.
        refuse_link(directory / "events.log")
        tmp = directory / f".events.log.replace-{os.getpid()}"
        with refusing_read_only(directory):
            write_durably(tmp, data, exclusive=False)
            generation = manifest.generation + 1
            save_manifest(directory, manifest.with_changes(generation=generation))
            os.replace(tmp, directory / "events.log")
            fsync_dir(directory)
    finally:
        lease.release()
    return generation


def _replace_segments(directory: Path, manifest: Manifest, data: bytes) -> int:
    """Format 2: write the new log as one own segment in a new folder, then point at it.

    The old folder (and its seeds' links) is removed after the manifest names
    the new one; a crash in between leaves a folder the next writer open removes.
    """
    for piece in log_pieces(directory, manifest):
        refuse_link(piece.path)  # a planted link is refused, as every writer does
    generation = manifest.generation + 1
    log_dir = directory / f"log-g{generation}"
    shutil.rmtree(log_dir, ignore_errors=True)  # a crashed replace's
    log_dir.mkdir(mode=0o700)
    segment = log_dir / segment_name(1, 1)
    write_durably(segment, data)
    with gc_paused():
        frames = scan_bytes(data).frames
        entries = list(sidecar_entries(frames, TurnTracker(), data, 0))
    write_sidecars(segment, entries)
    fsync_dir(log_dir)
    fsync_dir(directory)
    old = directory / manifest.log_dir
    save_manifest(
        directory,
        manifest.with_changes(generation=generation, log_dir=log_dir.name, seed=()),
    )
    shutil.rmtree(old, ignore_errors=True)
    return generation


# -- publishing a new session folder ----------------------------------------------


def link_blobs(source_blobs: Path, target_blobs: Path, names: Iterable[str]) -> None:
    """Hard-link (or, across devices or without permission, copy) immutable blobs.

    A source ``blobs/`` folder or blob that is a symbolic link is refused
    (``UnsafePath``): nothing outside the data root is linked or copied in.
    """
    refuse_link(source_blobs)
    target_blobs.mkdir(mode=0o700)
    for name in dict.fromkeys(names):
        if not isinstance(name, str) or not _BLOB_NAME.fullmatch(name):
            continue  # not a content address: never let a log name a path
        src, dst = source_blobs / name, target_blobs / name
        refuse_link(src)
        try:
            os.link(src, dst)
        except FileNotFoundError:
            continue  # the parent lacks it too; its rewind would be as incomplete
        except OSError as exc:
            if exc.errno in DiskFull.ERRNOS:
                raise  # a copy would need more room still
            shutil.copyfile(src, dst)
            fd = os.open(dst, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    fsync_dir(target_blobs)


@contextlib.contextmanager
def unpublished_session(store: SessionStore, session_id: str) -> Iterator[Path]:
    """A temporary folder to build a new session in, left unpublished.

    Any failure in the body removes the folder. The caller publishes it:
    :func:`building_session` at once, :func:`publish_batch` with others.

    Raises:
        DiskFull: no space at any step.
    """
    store.require_writable()
    tmp = store.temp_dir(session_id)
    with disk_full_as_typed(
        f"the disk is full: session {session_id} could not be saved; nothing of it was published",
        sessionId=session_id,
    ):
        with refusing_read_only(store.sessions_dir):
            tmp.mkdir(mode=0o700)
        try:
            yield tmp
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


@contextlib.contextmanager
def building_session(store: SessionStore, session_id: str) -> Iterator[Path]:
    """A temporary folder to build a new session in, published with one rename.

    The body fills the folder (and saves its manifest, which fsyncs it); a
    normal exit renames it to ``sessions/<id>``. Any failure, or a session of
    that id published first, removes the folder: nothing half-made is left.

    Raises:
        SessionExists: a session with this id was published first.
        DiskFull: no space at any step.
    """
    final = store.session_dir(session_id)
    with unpublished_session(store, session_id) as tmp:
        yield tmp
        try:
            publish_dir(tmp, final)
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            raise SessionExists(
                f"session {session_id} already exists", sessionId=session_id
            ) from exc


def publish_batch(store: SessionStore, built: Sequence[tuple[Path, str]]) -> list[bool]:
    """Publish many fully built (not yet durable) session folders with one sync.

    ``built`` holds each temporary folder and its session id, in publishing
    order (a fork after the parent it links its seeds from). Everything
    written is made durable by one :func:`sync_filesystem`, *then* each
    folder is renamed into place, then the sessions folder is fsynced once:
    a crash before a rename leaves a temporary folder (swept later, the
    session not published); a crash after leaves the session whole; once this
    returns, every session it says it published is durable.

    Returns, for each folder, whether it was published: ``False`` where a
    session of that id was published first (that folder is removed).

    Raises:
        DiskFull: no space to make the batch durable; nothing of it is
            published (the temporary folders are removed).
    """
    if not built:
        return []
    directory = store.sessions_dir
    published: list[tuple[Path, Path]] = []
    with disk_full_as_typed(
        f"the disk is full: {len(built)} sessions could not be saved; none of them was published",
        sessions=len(built),
    ):
        try:
            sync_filesystem(directory)
            outcome = []
            for tmp, session_id in built:
                final = store.session_dir(session_id)
                try:
                    if final.exists():
                        raise FileExistsError(errno.EEXIST, "published first", str(final))
                    os.rename(tmp, final)
                except OSError as exc:
                    if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                        raise
                    shutil.rmtree(tmp, ignore_errors=True)
                    outcome.append(False)
                    continue
                published.append((tmp, final))
                outcome.append(True)
            fsync_dir(directory)
        except BaseException:
            for tmp, final in reversed(published):  # all or nothing, as publish_dir
                try:
                    os.rename(final, tmp)
                except OSError:
                    shutil.rmtree(final, ignore_errors=True)
            for tmp, _ in built:
                shutil.rmtree(tmp, ignore_errors=True)
            raise
    return outcome


def publish_new_session(
    store: SessionStore,
    manifest: Manifest,
    log: bytes | bytearray,
    blobs: tuple[Path, Iterable[str]] | None = None,
) -> None:
    """Build a session folder under a temporary name and publish it with one rename.

    Args:
        store: the store to publish into.
        manifest: the new session's manifest (its id names the folder).
        log: the complete ``events.log`` bytes.
        blobs: a source ``blobs/`` folder and the blob names to bring along.

    Raises:
        SessionExists: a session with this id was published first.
        DiskFull: no space at any step; the temporary folder is removed and
            nothing is published.
    """
    with building_session(store, manifest.session_id) as tmp:
        write_durably(tmp / "events.log", log)
        if blobs is not None:
            link_blobs(blobs[0], tmp / "blobs", blobs[1])
        save_manifest(tmp, manifest)  # fsyncs tmp, making events.log and blobs/ durable too
