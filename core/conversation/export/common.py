"""What every export format shares: where a branch came from, and publishing the file.

A conversation leaves Branchwise in three shapes, each its own module over
the projection (no export reads events itself): Markdown for people
(:mod:`~branchwise.core.conversation.export.markdown`), versioned JSON for
programs (:mod:`~branchwise.core.conversation.export.json`) and a ChatGPT
``conversations.json`` (:mod:`~branchwise.core.conversation.export.chatgpt`).
All read committed frames without a lease, so a running conversation exports
what is committed.

A damaged log (``corrupt_log``: a bad frame followed by good ones) would
export silently shortened, so every format reads through
:func:`readable_snapshot`, which refuses it unless the caller asked for a
``partial`` export; a partial export says in the document itself that it is
incomplete and where the damage is (JSON ``complete``/``corruption``, a
Markdown note), so a reader of the file cannot mistake it for the whole
conversation.

:func:`write_export` publishes a file atomically (temporary file in the same
folder, fsync, then ``link`` for a new path or ``rename`` over an old one,
fsync the folder): a crash leaves the old file or the whole new one. An
existing file is refused (``output_exists``) unless ``overwrite`` is asked
for (the desktop's save dialog has already asked the person).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from branchwise.core.errors import (
    BranchwiseError,
    DiskFull,
    ExportNotWritten,
    OutputExists,
)
from branchwise.core.fs.atomic import fsync_dir, write_all
from branchwise.core.store.manifest import load_manifest
from branchwise.core.store.store import SessionSnapshot, SessionStore
from branchwise.core.store.trash import Trash, parent_state

FORMATS = ("markdown", "json")
"""The formats of one conversation (``--format``); ChatGPT's is the whole tree's."""


@dataclass(frozen=True, slots=True)
class ParentInfo:
    """Where a branch came from, as an export shows it.

    Attributes:
        session_id: the parent session.
        title: its title (``""`` when it was purged or is damaged).
        kind: ``fork`` (inherits history) or ``child``.
        turn_id: the parent's turn it was branched at.
        turn_number: that turn's 1-based position, when it is known.
        boundary_sequence: the seq a fork cut at.
        state: ``present``, ``trashed`` or ``missing``.
    """

    session_id: str
    title: str
    kind: str
    turn_id: str | None
    turn_number: int | None
    boundary_sequence: int | None
    state: str

    def to_json(self) -> dict[str, Any]:
        """camelCase form for the export document."""
        return {
            "sessionId": self.session_id,
            "title": self.title,
            "kind": self.kind,
            "turnId": self.turn_id,
            "turnNumber": self.turn_number,
            "boundarySequence": self.boundary_sequence,
            "state": self.state,
        }


def parent_info(store: SessionStore, snapshot: SessionSnapshot) -> ParentInfo | None:
    """The parent of a session, live, trashed or gone; ``None`` for a root.

    A fork inherits its parent's turns with their ids, so the turn number is
    read from the fork itself and survives its parent's deletion.
    """
    link = snapshot.manifest.parent
    if link is None:
        return None
    state = parent_state(store, link.session_id)
    title = ""
    with contextlib.suppress(BranchwiseError):
        if state == "present":
            title = store.manifest(link.session_id).title
        elif state == "trashed":
            title = load_manifest(Trash(store).session_dir(link.session_id)).title
    number = None
    if link.turn_id is not None:
        inherited = snapshot.projection.turn(link.turn_id)
        if inherited is not None:
            number = inherited.index
        elif state == "present":
            with contextlib.suppress(BranchwiseError):
                turn = store.read(link.session_id).projection.turn(link.turn_id)
                number = turn.index if turn is not None else None
    return ParentInfo(
        link.session_id, title, link.kind, link.turn_id, number, link.boundary_sequence, state
    )


def readable_snapshot(store: SessionStore, session_id: str, *, partial: bool) -> SessionSnapshot:
    """The session's snapshot for an export, refusing a damaged log unless ``partial``.

    Raises:
        CorruptLog: the log is damaged and ``partial`` is false (nothing written).
        InvalidSessionId, SessionNotFound, InvalidManifest: from the store.
    """
    snapshot = store.read(session_id)
    if snapshot.scan.corruption is not None and not partial:
        raise snapshot.scan.corruption
    return snapshot


def corruption_json(snapshot: SessionSnapshot) -> dict[str, Any] | None:
    """The damage a partial export stops at (the ``corrupt_log`` error body), or ``None``."""
    corruption = snapshot.scan.corruption
    return None if corruption is None else corruption.to_json()["error"]


# -- writing a file ------------------------------------------------------------------


def write_export(path: Path, data: bytes, *, overwrite: bool = False) -> None:
    """Publish ``data`` at ``path`` atomically (see the module docstring).

    Raises:
        OutputExists: ``path`` exists and ``overwrite`` is false; nothing written.
        DiskFull: no space; nothing is left behind.
        ExportNotWritten: the folder is missing or cannot be written; nothing left behind.
    """
    path = Path(path)
    if not overwrite and os.path.lexists(path):
        raise OutputExists(f"{path} already exists", path=str(path))
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if overwrite:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails if the name appeared meanwhile: never replaces
            os.unlink(tmp)
        fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if exc.errno == errno.EEXIST:
            raise OutputExists(f"{path} already exists", path=str(path)) from exc
        if exc.errno in DiskFull.ERRNOS:
            raise DiskFull(f"the disk is full: {path} was not written", path=str(path)) from exc
        raise ExportNotWritten(
            f"{path} could not be written: {exc.strerror or exc}", path=str(path)
        ) from exc


def format_for_path(path: Path) -> str:
    """The export format a file name asks for: ``.json`` is JSON, anything else Markdown."""
    return "json" if Path(path).suffix.lower() == ".json" else "markdown"
