"""Session generations: the fence that makes forks of a replaced log fail as stale.

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

import os
import time
from collections.abc import Iterable
from typing import Any

from .atomic import fsync_dir
from .events import validate_event
from .frames import encode_frame
from .lease import WriterLease
from .manifest import load_manifest, save_manifest
from .store import SessionStore


def bump_generation(store: SessionStore, session_id: str) -> int:
    """Raise a session's generation by one (under its writer lease); return the new one.

    Raises:
        LeaseHeld: a writer (this or another process) holds the session.
    """
    directory = store.session_dir(session_id)
    lease = WriterLease(directory, session_id)
    try:
        manifest = load_manifest(directory)
        generation = manifest.generation + 1
        save_manifest(directory, manifest.with_changes(generation=generation))
    finally:
        lease.release()
    return generation


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
        tmp = directory / f".events.log.replace-{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        generation = manifest.generation + 1
        save_manifest(directory, manifest.with_changes(generation=generation))
        os.replace(tmp, directory / "events.log")
        fsync_dir(directory)
    finally:
        lease.release()
    return generation
