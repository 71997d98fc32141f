"""The session store: the data root, session folders, writers and readers.

``SessionStore`` is the one entry point that turns session ids into paths (and
validates them first). Writers hold the session's lease and keep a live
projection; readers take no lock and see whole committed frames only.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import secrets
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from branchwise.core.errors import (
    AttachmentMissing,
    BranchwiseError,
    CorruptLog,
    DiskFull,
    InvalidManifest,
    ReadOnlyDataFolder,
    SessionExists,
    SessionNotFound,
    UnsafePath,
    UnsupportedFormat,
)
from branchwise.core.fs.atomic import (
    disk_full_as_typed,
    fsync_dir,
    process_alive,
    refusing_read_only,
)
from branchwise.core.fs.locks import WriterLease, lease_is_held
from branchwise.core.fs.safe_open import refuse_link
from branchwise.core.ids import new_session_id, validate_session_id
from branchwise.core.log.frames import Frame
from branchwise.core.log.scan import LogScan, TornTail, gc_paused
from branchwise.core.log.segment_writer import SegmentWriter
from branchwise.core.log.segments import (
    LEGACY_LOG,
    ROLL_BYTES,
    Piece,
    SessionLog,
    log_pieces,
    parse_segment_name,
    scan_session_log,
)
from branchwise.core.log.sidecars import CommitEntries, sidecar_entries
from branchwise.core.log.turn_table import save_turn_table
from branchwise.core.log.writer import CUT_SUFFIX, OS_FILE_OPS, FileOps
from branchwise.core.projection.events import (
    UNTIMED_EVENTS,
    EndReason,
    session_config,
    session_created,
    turn_end,
    validate_event,
)
from branchwise.core.projection.projection import Projection
from branchwise.core.projection.snapshot_cache import (
    SNAPSHOT_MIN_BYTES,
    Resumed,
    resuming,
    schedule_close_snapshot,
    schedule_snapshot,
    snapshot_note,
)
from branchwise.core.store.attachments import BlobStore
from branchwise.core.store.manifest import (
    DEFAULT_LOG_DIR,
    SEGMENTED,
    BranchLabel,
    Manifest,
    load_manifest,
    save_manifest,
)
from branchwise.core.store.migrate import (
    migrate_locked,
    remove_leftovers,
    unfinished_migration,
)

TEMP_PREFIX = ".tmp-"


def default_data_root() -> Path:
    """``$BRANCHWISE_HOME`` if set, else the platform's user data folder."""
    env = os.environ.get("BRANCHWISE_HOME")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_data_dir("branchwise", appauthor=False))


@dataclass(slots=True)
class SessionSnapshot:
    """A read-only view of a session as committed on disk.

    Attributes:
        manifest: the session's manifest.
        projection: the replay of every whole committed frame.
        scan: the raw scan (frames, torn tail, corruption).
    """

    manifest: Manifest
    projection: Projection
    scan: LogScan

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self.manifest.session_id

    @property
    def title(self) -> str:
        """The title: the log's latest ``session/title``, else the manifest's.

        The log is the title's record; the manifest may lag behind it when a
        full disk stopped its rewrite (see :meth:`SessionWriter.set_title`).
        """
        return self.projection.title or self.manifest.title


class SessionStore:
    """All sessions under one data root (created 0700).

    A data root that cannot be written (read-only mount, another user's
    folder) still opens: every reading command works, and every writing one
    refuses with ``ReadOnlyDataFolder`` before it changes anything.

    Args:
        root: the data root folder.
        file_ops: system calls used by log writers (fault-injection seam).
        prepare: create the data root and ``sessions/`` if missing.
        roll_bytes: the segment size writers roll at (tests and benchmarks
            make rolls happen sooner than the 16 MiB default).
        snapshot_bytes: a writer open that replays at least this many bytes
            writes a projection snapshot (``None``: never; tests use 0).
    """

    def __init__(
        self,
        root: Path,
        file_ops: FileOps = OS_FILE_OPS,
        *,
        prepare: bool = True,
        roll_bytes: int = ROLL_BYTES,
        snapshot_bytes: int | None = SNAPSHOT_MIN_BYTES,
    ) -> None:
        self.root = Path(root)
        self.roll_bytes = roll_bytes
        self.snapshot_bytes = snapshot_bytes
        self.sessions_dir = self.root / "sessions"
        self.file_ops = file_ops
        if not prepare:
            return  # an inspector (``branchwise doctor``) reports the folder as it is
        with contextlib.suppress(OSError):  # a reader needs nothing created; a writer
            self._ensure_folders()  # retries in require_writable and refuses typed
        _drop_group_and_other_bits(self.root)

    def _ensure_folders(self) -> None:
        """Create the data root (0700) and ``sessions/`` if they are missing."""
        if not self.root.is_dir():
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not self.sessions_dir.is_dir():
            self.sessions_dir.mkdir(mode=0o700, exist_ok=True)

    def require_writable(self) -> None:
        """Make sure ``sessions/`` exists and can be written, before a command writes anything.

        Raises:
            ReadOnlyDataFolder: the data folder cannot be written.
            UnsafePath: ``sessions/`` is a symbolic link.
        """
        refuse_link(self.sessions_dir)
        with refusing_read_only(self.root):
            self._ensure_folders()
        if not os.access(self.sessions_dir, os.W_OK | os.X_OK):
            raise ReadOnlyDataFolder(
                f"cannot write in {self.sessions_dir}", path=str(self.sessions_dir)
            )

    # -- paths -------------------------------------------------------------

    def session_dir(self, session_id: str) -> Path:
        """The folder of a session (the id is validated first).

        Raises:
            InvalidSessionId: not a session id.
            UnsafePath: ``sessions/`` or the session's folder is a symbolic link.
        """
        directory = self.sessions_dir / validate_session_id(session_id)
        refuse_link(self.sessions_dir)
        refuse_link(directory)
        return directory

    def exists(self, session_id: str) -> bool:
        """Whether a published session with this id exists."""
        return (self.session_dir(session_id) / "manifest.json").is_file()

    def manifest(self, session_id: str) -> Manifest:
        """The manifest of a session."""
        return load_manifest(self.session_dir(session_id))

    # -- creating ----------------------------------------------------------

    def create(self, title: str, session_id: str | None = None) -> SessionWriter:
        """Create a root session and return its writer.

        The folder is built under a temporary name and published with one
        rename, so a crash never leaves a session without a manifest, and a
        failure (a full disk) removes the temporary folder: nothing is published.

        Raises:
            SessionExists: a session with this id exists.
            DiskFull: no space at any step; nothing was created.
        """
        session_id = validate_session_id(new_session_id() if session_id is None else session_id)
        final = self.session_dir(session_id)
        if os.path.lexists(final):
            raise SessionExists(f"session {session_id} already exists", sessionId=session_id)
        self.require_writable()
        manifest = Manifest(
            session_id=session_id, title=title, created_at=time.time(), format=SEGMENTED
        )
        tmp = self.temp_dir(session_id)
        message = f"the disk is full: session {session_id} could not be created; nothing was saved"
        # The writer built here is the one returned: its lease (a flock on the inode) and
        # log descriptor survive the publishing rename, so nothing can fail after it.
        lease: WriterLease | None = None
        log: SegmentWriter | None = None
        projection = Projection()
        with disk_full_as_typed(message, sessionId=session_id):
            with refusing_read_only(self.sessions_dir):
                tmp.mkdir(mode=0o700)
            try:
                save_manifest(tmp, manifest)
                lease = WriterLease(tmp, session_id)
                (tmp / manifest.log_dir).mkdir(mode=0o700)
                empty = SessionLog(manifest, [], [], b"")
                log = SegmentWriter(
                    tmp / manifest.log_dir,
                    empty,
                    [],
                    self.file_ops,
                    roll_bytes=self.roll_bytes,
                    untimed=UNTIMED_EVENTS,
                )
                created = log.append([session_created(title, "root")])
                projection.apply(created)
                log.note_commit(created, projection)
                publish_dir(tmp, final)
            except BaseException as exc:
                if log is not None:
                    log.close()
                if lease is not None:
                    lease.release()
                shutil.rmtree(tmp, ignore_errors=True)
                if isinstance(exc, DiskFull):
                    raise DiskFull(message, sessionId=session_id) from exc
                raise
        lease.path = final / "writer.lock"
        log.moved_to(final / manifest.log_dir)
        return SessionWriter(self, final, manifest, lease, log, projection)

    # -- reading -----------------------------------------------------------

    def read(self, session_id: str, *, every_frame: bool = True) -> SessionSnapshot:
        """Read a session without any lock (whole committed frames only).

        Args:
            session_id: the session.
            every_frame: the caller reads ``scan.frames`` (an export, a
                catch-up); ``False`` when only the projection is wanted: the
                projection snapshot (:mod:`~branchwise.core.projection.snapshot_cache`) may
                then stand for the history it covers, and ``scan.frames`` holds
                only the frames after it (``scan.resumed`` says where).
        """
        directory = self.session_dir(session_id)
        manifest = load_manifest(directory)
        used: list[Resumed] = []
        # One GC pause over scan and replay: re-enabling in between would make
        # the collector walk every freshly decoded event once more.
        with gc_paused():
            log = scan_session_log(directory, manifest, None if every_frame else resuming(used))
            start = _restored(used)
            projection = _replay(log.scan, session_id, log.manifest.seed_length, start)
        return SessionSnapshot(log.manifest, projection, log.scan)

    def open_writer(self, session_id: str, *, continue_turn: str | None = None) -> SessionWriter:
        """Take the session's writer lease and recover it for appending.

        Cuts a torn tail (reported in ``cut_tail``), refuses a corrupt log,
        closes a turn a crash left open with ``turn/end{interrupted}``, and
        brings a manifest whose title lags behind the log's up to date.

        Args:
            session_id: the session.
            continue_turn: an open turn this writer goes on answering instead
                of closing it (the turn an edit or regenerate published already
                started); any other open turn is closed as ``interrupted``.

        Raises:
            LeaseHeld: another writer holds the lease.
            CorruptLog: damage followed by good frames, or a complete last
                commit that fails its checksum.
            ReadOnlyDataFolder: the session's folder cannot be written.
            UnsafePath: the folder or a file in it is a symbolic link.
            DiskFull: no space to close a turn left open (the lease is released).
        """
        directory = self.session_dir(session_id)
        manifest = load_manifest(directory)
        lease = WriterLease(directory, session_id)
        full = f"the disk is full: session {session_id} could not be opened for writing"
        try:
            with refusing_read_only(directory), disk_full_as_typed(full, sessionId=session_id):
                manifest = load_manifest(directory)  # as of the lease: a migration may be done
                if manifest.segmented:
                    remove_leftovers(directory, manifest)
                else:
                    manifest = migrate_locked(directory, manifest)
            used: list[Resumed] = []
            with gc_paused():
                session_log = scan_session_log(directory, manifest, resuming(used, for_writer=True))
                manifest = session_log.manifest
                if session_log.scan.corruption is not None:
                    raise session_log.scan.corruption
                previous = used[0] if used else None
                projection, entries = _replay_indexing(session_log, session_id, previous)
                with refusing_read_only(directory), disk_full_as_typed(full, sessionId=session_id):
                    log = SegmentWriter(
                        directory / manifest.log_dir,
                        session_log,
                        entries,
                        self.file_ops,
                        roll_bytes=self.roll_bytes,
                        sidecar_base=previous.sidecar_base if previous is not None else None,
                        untimed=UNTIMED_EVENTS,
                    )
                covered = previous.snapshot.end if previous is not None else 0
                replayed = session_log.scan.end - covered
                if self.snapshot_bytes is not None and replayed >= self.snapshot_bytes:
                    # Before any commit below moves the projection past the scanned end.
                    schedule_snapshot(session_log, projection, previous, entries)
        except BaseException:
            lease.release()
            raise
        writer = SessionWriter(self, directory, manifest, lease, log, projection)
        try:
            open_turn = projection.open_turn
            if open_turn is not None and open_turn.turn_id != continue_turn:
                writer.commit([turn_end(open_turn.turn_id, EndReason.INTERRUPTED)])
        except BaseException:
            writer.close()
            raise
        writer.sync_manifest_title()
        return writer

    def migrate(self, session_id: str) -> bool:
        """Upgrade a format-1 session to format 2 under its lease; whether anything was done.

        Crash-safe at every step (see :mod:`~branchwise.core.store.migrate`).
        A format-2 session whose migration a crash stopped after its manifest
        gets its last step now (its stray ``events.log``, a second link of the
        first segment, is removed) and counts as migrated; any other format-2
        session is left as it is.

        Raises:
            LeaseHeld: a writer holds the session.
            CorruptLog: its log is corrupt (nothing is changed).
            ReadOnlyDataFolder, DiskFull, UnsafePath: as for :meth:`open_writer`.
        """
        directory = self.session_dir(session_id)
        load_manifest(directory)  # a missing or damaged session is refused before the lease
        lease = WriterLease(directory, session_id)
        try:
            manifest = load_manifest(directory)
            if manifest.segmented:
                with refusing_read_only(directory):
                    return remove_leftovers(directory, manifest)
            with (
                refusing_read_only(directory),
                disk_full_as_typed(
                    f"the disk is full: session {session_id} could not be upgraded; "
                    "it is kept as it was",
                    sessionId=session_id,
                ),
            ):
                migrate_locked(directory, manifest)
            return True
        finally:
            lease.release()

    def is_being_written(self, session_id: str) -> bool:
        """Whether a writer (any process) holds the session's lease now."""
        return lease_is_held(self.session_dir(session_id))

    def iter_manifests(self) -> Iterator[Manifest | BranchwiseError]:
        """Every session's manifest, in one pass over ``sessions/``.

        A damaged, unreadable or misnamed manifest, and a session folder that
        is a symbolic link, are yielded as their typed error (with
        ``sessionId``, the folder's name) so one bad folder never hides the
        others. A missing ``sessions/`` (a read-only data root never written)
        holds no sessions.
        """
        refuse_link(self.sessions_dir)
        try:
            entries = os.scandir(self.sessions_dir)
        except FileNotFoundError:
            return
        with entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                if entry.is_symlink():
                    yield UnsafePath(
                        f"the session folder {entry.name} is a symbolic link; it is not followed",
                        sessionId=entry.name,
                        path=entry.path,
                    )
                    continue
                if not entry.is_dir(follow_symlinks=False):
                    continue
                try:
                    yield load_manifest(Path(entry.path))
                except (InvalidManifest, UnsupportedFormat, SessionNotFound, UnsafePath) as exc:
                    exc.details.setdefault("sessionId", entry.name)
                    yield exc

    def list_sessions(self) -> list[Manifest]:
        """Readable sessions, newest first."""
        found = [m for m in self.iter_manifests() if isinstance(m, Manifest)]
        return sorted(found, key=lambda m: (m.created_at, m.session_id), reverse=True)

    def temp_dir(self, session_id: str) -> Path:
        """A fresh folder name for building a session before its publishing rename.

        The name starts with the builder's pid so a sweep can tell a crashed
        builder's leftovers from a folder another live process is still building.
        """
        token = secrets.token_hex(4)
        return self.sessions_dir / f"{TEMP_PREFIX}{os.getpid()}-{session_id}-{token}"

    def sweep_temporary(self) -> list[str]:
        """Remove half-built session folders whose builder died; return their names."""
        swept: list[str] = []
        try:
            entries = os.scandir(self.sessions_dir)
        except FileNotFoundError:
            return swept
        with entries:
            for entry in entries:
                if not entry.name.startswith(TEMP_PREFIX) or not entry.is_dir(
                    follow_symlinks=False
                ):
                    continue
                if _builder_alive(entry.name[len(TEMP_PREFIX) :]):
                    continue
                shutil.rmtree(entry.path, ignore_errors=True)
                swept.append(entry.name)
        return swept


def verify_session(store: SessionStore, session_id: str) -> dict[str, Any]:
    """Integrity report of one session (camelCase, JSON-ready); changes nothing on disk.

    ``findings`` lists every problem found, each with a ``code``, ``message``
    and the ``file`` it concerns: a manifest that is damaged, unreadable or
    names another session; a symbolic link where a file or the folder
    belongs; a torn tail (which the next writer cuts); corruption; and every
    ``events.log.cut-…`` copy of bytes an earlier repair removed (``offset``
    where they were cut, ``length``). ``ok`` is false when the session cannot
    be used as it is (anything but a torn tail or a kept copy).

    Raises:
        InvalidSessionId: not a session id.
        SessionNotFound: no such session folder.
    """
    validate_session_id(session_id)
    findings: list[dict[str, Any]] = []
    report: dict[str, Any] = {
        "ok": True,
        "commits": 0,
        "lastSeq": 0,
        "tornTail": None,
        "corruption": None,
        "findings": findings,
    }

    def problem(exc: BranchwiseError, file: str, *, blocking: bool = True) -> None:
        findings.append({**exc.to_json()["error"], "file": file})
        if blocking:
            report["ok"] = False

    try:
        directory = store.session_dir(session_id)
    except UnsafePath as exc:
        problem(exc, session_id)
        return report
    if not directory.is_dir():
        raise SessionNotFound(f"no session {session_id}", sessionId=session_id)
    # Without a readable manifest, the folder's files say which format to read (no seeds then).
    segmented = (directory / DEFAULT_LOG_DIR).is_dir() and not (directory / LEGACY_LOG).exists()
    manifest = Manifest(session_id=session_id, title="", format=SEGMENTED if segmented else 1)
    try:
        manifest = load_manifest(directory)
    except (InvalidManifest, UnsupportedFormat, UnsafePath, SessionNotFound) as exc:
        problem(exc, "manifest.json")
    try:
        refuse_link(directory / "writer.lock")
    except UnsafePath as exc:
        problem(exc, "writer.lock")
    try:
        session_log: SessionLog | None = scan_session_log(directory, manifest)
    except (UnsafePath, UnsupportedFormat) as exc:
        path = exc.details.get("path")
        problem(exc, os.path.relpath(path, directory) if isinstance(path, str) else "events.log")
        session_log = None
    if session_log is not None:
        scan = session_log.scan
        if scan.corruption is None:
            scan.corruption = _lost_under_seeds(store, session_id, session_log)
            if scan.corruption is not None:
                scan.torn_tail = None  # bytes a seed vouches for: lost, not an unfinished write
        report["commits"], report["lastSeq"] = len(scan.frames), scan.last_seq
        report["files"] = _file_report(directory, session_log)
        if (torn := scan.torn_tail) is not None:
            piece, offset = session_log.locate(torn.offset)
            report["tornTail"] = {"offset": offset, "length": torn.length}
            findings.append(
                {
                    "code": "torn_tail",
                    "message": f"{torn.length} bytes at byte {offset} of {piece.name} do not "
                    "form a whole commit (an interrupted write); the next writer cuts them "
                    "and keeps a copy",
                    "file": piece.name,
                    "offset": offset,
                    "length": torn.length,
                }
            )
        if scan.corruption is not None:
            report["corruption"] = scan.corruption.to_json()["error"]
            problem(scan.corruption, str(scan.corruption.details.get("file", "events.log")))
        elif (note := snapshot_note(session_log)) is not None:
            findings.append(note)  # a cache: noted, never blocking
        projection = None
        if scan.corruption is None:
            with contextlib.suppress(BranchwiseError, KeyError, TypeError, ValueError):
                projection = _replay(scan, session_id, session_log.manifest.seed_length)
        if projection is not None:
            findings.extend(_attachment_findings(store, projection, report))
    if (leftover := unfinished_migration(directory, manifest)) is not None:
        findings.append(leftover)  # readers ignore it: noted, never blocking
    findings.extend(_cut_copies(directory, directory))
    findings.extend(_cut_copies(directory / manifest.log_dir, directory))
    return report


def _attachment_findings(
    store: SessionStore, projection: Projection, report: dict[str, Any]
) -> list[dict[str, Any]]:
    """An ``attachment_missing`` finding per referenced blob that is gone or damaged.

    The conversation still opens (the transcript says "attachment missing"),
    but it is not whole, so ``ok`` turns false. ``attachments`` counts the
    blobs checked; it is left out for a conversation without any, whose
    report reads as before.
    """
    blobs = BlobStore(store.root)
    found = []
    checked: set[str] = set()
    for ref in projection.attachment_refs():
        if ref.sha256 in checked:
            continue
        checked.add(ref.sha256)
        problem = blobs.check(ref)
        if problem is None:
            continue
        error = AttachmentMissing(
            f"attachment {ref.name} ({ref.sha256}) is {problem.problem}",
            sha256=ref.sha256,
            name=ref.name,
            problem=problem.problem,
        )
        found.append({**error.to_json()["error"], "file": f"attachments/sha256/{ref.sha256[:2]}"})
        report["ok"] = False
    if checked:
        report["attachments"] = len(checked)
    return found


def _lost_under_seeds(
    store: SessionStore, session_id: str, session_log: SessionLog
) -> CorruptLog | None:
    """Commits of the active segment that another session's seed entry vouches for, if missing.

    A fork links the segment it inherits and records its ``end`` and
    ``endCommit``, so a child proves the parent's bytes existed even when the
    parent's own ``.idx`` (a cache) is gone. Only a file with more than one
    link can be another session's seed, so an unshared segment costs one
    ``lstat``; otherwise every manifest is read once (``verify`` only).
    """
    active = session_log.active
    if active is None or not session_log.manifest.segmented:
        return None
    try:
        status = os.lstat(active.path)
    except OSError:
        return None
    if status.st_nlink < 2:
        return None
    scan = session_log.scan
    held = scan.end - session_log.active_start
    vouching: tuple[int, str] | None = None
    for manifest in store.iter_manifests():
        if not isinstance(manifest, Manifest) or manifest.session_id == session_id:
            continue
        folder = store.sessions_dir / manifest.session_id / manifest.log_dir
        for seed in manifest.seed:
            try:
                linked = os.lstat(folder / seed.file)
            except OSError:
                continue
            if (linked.st_dev, linked.st_ino) != (status.st_dev, status.st_ino):
                continue
            if seed.end > held and (vouching is None or seed.end_commit > vouching[0]):
                vouching = (seed.end_commit, manifest.session_id)
    if vouching is None or vouching[0] <= scan.last_commit:
        return None
    last, child = vouching
    first = scan.last_commit + 1
    return CorruptLog(
        f"commits {first} to {last} were acknowledged (the seed entry of session {child} "
        f"vouches for them) and are missing: {active.name} was cut short at byte {held}",
        file=active.name,
        offset=held,
        afterSeq=scan.last_seq,
        firstMissingCommit=first,
        lastMissingCommit=last,
        vouchedBy=child,
    )


def _file_report(directory: Path, session_log: SessionLog) -> list[dict[str, Any]]:
    """One entry per file of the log: its kind, bytes read, links and commits verified in it.

    ``links`` above 1 means the bytes are shared with other sessions (a seed,
    or a segment a fork linked): damage to them shows in every such session.
    A log that could not be read (a seed missing or shorter than its entry)
    has no pieces in ``session_log``: its files are listed from the layout
    with the bytes they hold on disk and no commit verified.
    """
    frames, files = session_log.scan.frames, []
    if not session_log.pieces:
        return [_unread_file(piece) for piece in log_pieces(directory, session_log.manifest)]
    ends = [*session_log.starts[1:], len(session_log.data)]
    for piece, start, end in zip(session_log.pieces, session_log.starts, ends, strict=True):
        try:
            links = os.lstat(piece.path).st_nlink
        except FileNotFoundError:
            links = 0
        files.append(
            {
                "file": piece.name,
                "kind": "seed" if piece.seed is not None else "segment",
                "bytes": end - start,
                "links": links,
                "firstCommit": piece.first_commit,
                "firstSeq": piece.first_seq,
                "commits": bisect.bisect_left(frames, end, key=_offset)
                - bisect.bisect_left(frames, start, key=_offset),
            }
        )
    return files


def _unread_file(piece: Piece) -> dict[str, Any]:
    """A :func:`_file_report` entry for a file of a log that could not be read."""
    try:
        status = os.lstat(piece.path)
        size, links = status.st_size, status.st_nlink
    except FileNotFoundError:
        size, links = 0, 0
    return {
        "file": piece.name,
        "kind": "seed" if piece.seed is not None else "segment",
        "bytes": size if piece.seed is None else min(size, piece.seed.end),
        "links": links,
        "firstCommit": piece.first_commit,
        "firstSeq": piece.first_seq,
        "commits": 0,
    }


def _offset(frame: Frame) -> int:
    return frame.offset


def _cut_copies(folder: Path, session_dir: Path) -> list[dict[str, Any]]:
    """A finding for every ``<log>.cut-…`` file in ``folder``: bytes a repair removed and kept."""
    found: list[dict[str, Any]] = []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return found
    for entry in entries:
        log_name, cut, rest = entry.name.partition(CUT_SUFFIX)
        if not cut or not (log_name == LEGACY_LOG or parse_segment_name(log_name)):
            continue
        _, _, at = rest.rpartition("-at")
        offset = int(at.split("-")[0]) if at.split("-")[0].isdigit() else None
        length = entry.stat(follow_symlinks=False).st_size
        name = os.path.relpath(entry.path, session_dir)
        found.append(
            {
                "code": "log_tail_cut",
                "message": f"{length} bytes cut from {log_name}"
                + (f" at byte {offset}" if offset is not None else "")
                + f" by an earlier repair are kept in {name}",
                "file": name,
                "offset": offset,
                "length": length,
            }
        )
    return found


def _drop_group_and_other_bits(root: Path) -> None:
    """Keep the data root private (0700 or stricter) without ever widening the owner's bits.

    A folder someone made read-only (0500) stays read-only; one that is not
    ours, or on a read-only mount, is left as it is.
    """
    try:
        mode = stat.S_IMODE(os.stat(root).st_mode)
        if mode & 0o077:
            os.chmod(root, mode & 0o700)
    except OSError:
        pass


def _builder_alive(rest: str) -> bool:
    """Whether the process named at the start of a temp folder name still runs."""
    pid_text = rest.split("-", 1)[0]
    return pid_text.isdigit() and process_alive(int(pid_text))


def _restored(used: list[Resumed]) -> Projection | None:
    """The projection restored from the snapshot the scan resumed after (``None``: none)."""
    if not used or not isinstance(used[0].restored, Projection):
        return None
    return used[0].restored


def _replay_indexing(
    session_log: SessionLog, session_id: str, previous: Resumed | None = None
) -> tuple[Projection, list[tuple[CommitEntries, int]]]:
    """Replay a log (after ``previous``, if it resumed after a snapshot), and collect
    the sidecar entries of its active segment's frames (after the snapshot's)."""
    projection = _restored([previous] if previous else [])
    if projection is None:
        projection = Projection(seed_length=session_log.manifest.seed_length)
    try:
        entries = list(
            sidecar_entries(
                session_log.scan.frames, projection, session_log.data, session_log.active_start
            )
            if session_log.active is not None
            else ()
        )
        if session_log.active is None:
            for frame in session_log.scan.frames:
                projection.apply(frame.events)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptLog(
            f"session {session_id} holds an event this version cannot read: {exc!r}",
            sessionId=session_id,
        ) from exc
    return projection, entries


def _replay(
    scan: LogScan, session_id: str, seed_length: int = 0, start: Projection | None = None
) -> Projection:
    """Replay verified frames (onto ``start``, a snapshot's projection, if given).

    An event whose fields make no sense is a typed error: checksums prove
    bytes are as written, not that a writer wrote sense (a newer or buggy
    writer); such a log is refused like corruption, never with a bare
    ``KeyError``.
    """
    try:
        projection = start if start is not None else Projection(seed_length=seed_length)
        for frame in scan.frames:
            projection.apply(frame.events)
        return projection
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptLog(
            f"session {session_id} holds an event this version cannot read: {exc!r}",
            sessionId=session_id,
        ) from exc


def publish_dir(tmp: Path, final: Path) -> None:
    """Publish a fully built folder with one rename (refusing to overwrite).

    All or nothing: if the rename cannot be made durable (a full disk), it is
    taken back before the error is raised: ``final`` is renamed to ``tmp``
    again or, should that fail too, removed (only unlinks, which need no
    space). The folder was published a moment ago by this call, for a new id.
    """
    if final.exists():
        raise SessionExists(f"session {final.name} already exists", sessionId=final.name)
    os.rename(tmp, final)
    try:
        fsync_dir(final.parent)
    except OSError:
        try:
            os.rename(final, tmp)
        except OSError:
            shutil.rmtree(final, ignore_errors=True)
        raise


class SessionWriter:
    """The one writer of a session: lease holder, appender, live projection.

    Attributes:
        session_id: the session.
        manifest: its manifest as last written.
        projection: kept current with every commit (no replay needed).
        cut_tail: the torn tail cut when the writer opened, if there was one.
        cut_copy: the ``events.log.cut-…`` file holding exactly the bytes cut.
    """

    def __init__(
        self,
        store: SessionStore,
        directory: Path,
        manifest: Manifest,
        lease: WriterLease,
        log: SegmentWriter,
        projection: Projection,
    ) -> None:
        self.store = store
        self.directory = directory
        self.session_id = manifest.session_id
        self.manifest = manifest
        self.projection = projection
        self.cut_tail: TornTail | None = log.cut_tail
        self.cut_copy: Path | None = log.cut_copy
        self._lease = lease
        self._log = log

    def commit(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Validate and durably commit ``events`` as one atomic commit.

        Returns the committed events with their ``seq`` and ``ts``. The live
        projection is updated only after the commit is durable.
        """
        for event in events:
            validate_event(event)
        committed = self._log.append(events)
        self.projection.apply(committed)
        self._log.note_commit(committed, self.projection)
        return committed

    def set_conversation_settings(
        self,
        model: str | None,
        system: str | None,
        temperature: float | None,
        model_server: str | None = None,
    ) -> None:
        """Give the conversation its own model, system prompt, temperature and model server.

        One ``session/config`` commit (``None``: as in the app's settings);
        the writer owns the event's shape so callers never build it.

        Raises:
            InvalidEvent: a value the event cannot hold; DiskFull, OSError: not committed.
        """
        self.commit([session_config(model, system, temperature, model_server)])

    def set_title(self, title: str) -> None:
        """Rename the session: a ``session/title`` event, then the manifest.

        The log is the title's record and the manifest a copy of it, so
        listing sessions needs no log. Committing first means a failure leaves
        them agreeing or the log ahead, never the manifest ahead: if the event
        cannot be committed, nothing changed; if the manifest cannot be
        rewritten (a full disk), it keeps the old title, readers that replay
        the log (:attr:`SessionSnapshot.title`, the desktop) show the new one,
        and the next :meth:`SessionStore.open_writer` rewrites the manifest.

        Raises:
            DiskFull: no space; ``titleSaved`` says whether the event was committed.
        """
        try:
            self.commit([{"type": "session/title", "title": title}])
        except DiskFull as exc:
            exc.details.setdefault("titleSaved", False)
            raise
        manifest = self.manifest.with_changes(title=title)
        with (
            disk_full_as_typed(
                "the disk is full: the new title is saved in the conversation's history, "
                "but its session list entry keeps the old one until it is next opened",
                sessionId=self.session_id,
                titleSaved=True,
            ),
            refusing_read_only(self.directory),
        ):
            save_manifest(self.directory, manifest)
        self.manifest = manifest

    def set_label(self, label: BranchLabel | None) -> None:
        """Replace the branch's label (``None``: computed from its lineage again).

        The label lives in the manifest alone: it says how a branch came to
        be, which the log records already (its fork and first prompt); the
        manifest keeps it so listing branches reads no log.

        Raises:
            DiskFull: no space; the manifest keeps the old label.
        """
        manifest = self.manifest.with_changes(label=label)
        with (
            disk_full_as_typed(
                "the disk is full: the label could not be saved", sessionId=self.session_id
            ),
            refusing_read_only(self.directory),
        ):
            save_manifest(self.directory, manifest)
        self.manifest = manifest

    def sync_manifest_title(self) -> None:
        """Rewrite the manifest if its title lags behind the log's (best effort).

        A full disk can stop :meth:`set_title` between its commit and the
        manifest; this catches the manifest up when the session is next opened.
        """
        title = self.projection.title
        if not title or title == self.manifest.title:
            return
        manifest = self.manifest.with_changes(title=title)
        try:
            save_manifest(self.directory, manifest)
        except OSError:
            return  # still lagging; readers take the log's title, the next open retries
        self.manifest = manifest

    def close(self) -> None:
        """Close the log, refresh the turn table, release the lease (idempotent).

        The turn table (:mod:`~branchwise.core.log.turn_table`) is a cache
        only the lease holder writes; it is refreshed here, after the
        sidecars are synced, and only when many turns are missing from it.
        A projection snapshot is left the same way when the store's snapshot
        threshold of bytes is not covered by the last one (its key is read
        and it is written on a background thread:
        :func:`~branchwise.core.projection.snapshot_cache.schedule_close_snapshot`),
        so the first cold read after a close does not replay the session.
        """
        self._log.close()
        if self._lease.held:
            with contextlib.suppress(OSError, BranchwiseError, ValueError):
                manifest = load_manifest(self.directory)
                with contextlib.suppress(OSError, BranchwiseError, ValueError):
                    save_turn_table(log_pieces(self.directory, manifest))
                if self.store.snapshot_bytes is not None:
                    schedule_close_snapshot(
                        self.directory, manifest, self.projection, self.store.snapshot_bytes
                    )
            self._lease.release()

    def __enter__(self) -> SessionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
