"""Full-text search over every conversation: a rebuildable SQLite FTS5 cache of the logs.

The index lives at ``<root>/search.sqlite3`` and holds nothing the logs do
not: deleting it loses nothing (the next :meth:`SearchIndex.catch_up_all`
rebuilds it), and a file SQLite calls corrupt is moved aside as
``search.sqlite3.bad-<UTC time>`` and rebuilt. Only an index that cannot be
used at all (locked by another process past the wait, a full disk) raises
:class:`~branchwise.core.errors.SearchIndexUnavailable`; in a data folder
that cannot be written the index is built in memory for the call instead.

What is indexed, and how it stays current:

* One row per **message id** (user and assistant texts, code included), one
  per **tool call** (its tool's name and arguments, role ``tool_call``) and
  per **tool result** (role ``tool_result``; a hit's ``messageId`` is the
  call's id, the transcript's tool message), and one per session **title**.
  A fork copies its parent's prefix with the same message ids, so a message
  inherited by ten branches is one row (keyed by the lineage's root session
  and the message id: two unrelated sessions that reuse an id, as imports
  may, stay two messages), and the
  ``message_sessions`` table says which conversations contain it. A hit is
  shown in the session asked for (``session_id=``), else in the session that
  wrote it (the first created of those containing it: a branch is created
  after the ancestor it inherits from); the others are its ``also_in``.
* A streaming answer is committed as growing partial texts of one message
  id: the row is updated in place with the latest text. In format 2 a
  partial commit holds only the new text (a delta): the row holds the
  concatenation, continuing from the text and the message indexed before when
  a catch-up starts inside that answer's turn (the hook asks for them), so an
  answer cut by a crash is found by words that only its deltas hold.
* Per session the index remembers the next commit and seq, the byte offset
  past the last indexed frame, the manifest's ``generation`` and the log
  file's inode. :meth:`SearchIndex.catch_up` reads only the bytes after that
  offset, through the projection's catch-up hook
  (:func:`~branchwise.core.projection.tail.read_tail`, told which commit and
  seq come next). A changed generation or inode, or a
  log shorter than the offset, means the log was replaced: the session is
  indexed again from scratch. The session's rows and its position are written
  in one transaction, so a crash between a commit and its indexing loses
  nothing: the next catch-up finds the commit after the remembered offset.
* The same message id carrying different text in two sessions (a log
  replaced by a rewind that reused an id) keeps the text indexed last.
* Every merge (a branch brought back into a conversation,
  :mod:`branchwise.core.conversation.merge`) is recorded in the ``merges``
  table as it is read. The merge lives only in the log it was written to, and this
  catch-up already reads every new commit of every session, so the lineage
  tree learns which branches were brought back — including merges another
  process wrote — for the price of one row per merge
  (:meth:`SearchIndex.merges`). A fork inherits its parent's merges with
  its seed, so rows name the log that holds them; which of them concern a
  branch (the log is one of its ancestors) is for the reader to decide.
* Nothing indexes on a turn's commit path: the CLI's writing commands leave
  the index alone (the next ``search`` catches up), the app catches up in a
  background worker. The schema version is ``PRAGMA user_version``; an index
  of another version is emptied when opened and refilled by the next
  catch-up, which takes the lock one session at a time so searches are
  answered (from what is indexed so far) while it runs.

Thread use: one instance serializes its own calls with a lock and opens its
connection with ``check_same_thread=False``, so a worker thread and the UI
thread may share it (the UI still calls it through ``asyncio.to_thread``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from branchwise.core.conversation.attachments import attachment_text
from branchwise.core.errors import (
    BranchwiseError,
    SearchIndexUnavailable,
    UnsafePath,
)
from branchwise.core.log.segments import log_identity, read_log_from
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.projection.tail import TailPosition, read_tail
from branchwise.core.search.query import SearchResult, query_terms, run_query, short_query_text
from branchwise.core.store.attachments import BlobStore
from branchwise.core.store.manifest import Manifest
from branchwise.core.store.store import SessionStore

log = logging.getLogger(__name__)

INDEX_NAME = "search.sqlite3"
SCHEMA_VERSION = 4
"""Kept in ``PRAGMA user_version``; an index of another version is emptied and refilled."""
BUSY_TIMEOUT = 5.0
"""Seconds to wait for another process's write transaction before giving up."""
BATCH_BYTES = 256 * 1024
"""Log bytes indexed per transaction (a frame longer than this is one batch)."""
WAL_LIMIT_PAGES = 256
"""The WAL is checkpointed past this many pages and cut back to their size (1 MiB)."""
_SQLITE_FULL = 13

_T = TypeVar("_T")
# SQLite's primary result codes (the low byte of an extended code).
_SQLITE_READONLY, _SQLITE_CORRUPT, _SQLITE_CANTOPEN, _SQLITE_NOTADB = 8, 11, 14, 26

_HEADS_FUNCTION = "branchwise_heads"

_SCHEMA = (
    """CREATE TABLE sessions(
    session_id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    created_at REAL NOT NULL,
    generation INTEGER NOT NULL,
    log_inode INTEGER NOT NULL,
    log_offset INTEGER NOT NULL,
    next_commit INTEGER NOT NULL,
    next_seq INTEGER NOT NULL,
    open_turn TEXT
)""",
    """CREATE TABLE messages(
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    message_id TEXT NOT NULL,
    role TEXT NOT NULL,
    turn_id TEXT,
    content TEXT NOT NULL
)""",
    # alsoIn: which conversations hold a message, keyed by the message's row.
    """CREATE TABLE message_sessions(
    message INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    PRIMARY KEY (message, session_id)
) WITHOUT ROWID""",
    """CREATE INDEX message_sessions_by_session ON message_sessions(session_id, message)""",
    # Branches brought back: one row per merge, keyed by the log holding it.
    """CREATE TABLE merges(
    into_session_id TEXT NOT NULL,
    merge_sequence INTEGER NOT NULL,
    child_session_id TEXT NOT NULL,
    ts REAL NOT NULL,
    PRIMARY KEY (into_session_id, merge_sequence)
) WITHOUT ROWID""",
    # Terms of three or more characters: substrings, through trigrams.
    """CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, content='messages', content_rowid='id', tokenize='trigram'
)""",
    # Terms of one or two characters: one token per Han or kana character and the first two
    # letters of every other word (short_query_text). Contentless: the text is derived.
    """CREATE VIRTUAL TABLE messages_short USING fts5(
    heads, content='', tokenize='unicode61 remove_diacritics 0', prefix='1'
)""",
    f"""CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
    INSERT INTO messages_short(rowid, heads) VALUES (new.id, {_HEADS_FUNCTION}(new.content));
END""",
    f"""CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_short(messages_short, rowid, heads)
        VALUES ('delete', old.id, {_HEADS_FUNCTION}(old.content));
END""",
    f"""CREATE TRIGGER messages_au AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_short(messages_short, rowid, heads)
        VALUES ('delete', old.id, {_HEADS_FUNCTION}(old.content));
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
    INSERT INTO messages_short(rowid, heads) VALUES (new.id, {_HEADS_FUNCTION}(new.content));
END""",
)


@dataclass(frozen=True, slots=True)
class MergedBranch:
    """One merge the index has read: a branch brought back into a log.

    Attributes:
        child_session_id: the branch that was brought back.
        into_session_id: the session whose log holds the merge (an ancestor of
            the branch, or a fork of one that inherited the merge).
        merge_sequence: the merge's seq in that log.
        at: when it was written (seconds since the epoch).
    """

    child_session_id: str
    into_session_id: str
    merge_sequence: int
    at: float

    def to_json(self) -> dict[str, Any]:
        """``{"intoSessionId", "mergeSequence"}``, as the CLI's lineage nodes carry it."""
        return {"intoSessionId": self.into_session_id, "mergeSequence": self.merge_sequence}


@dataclass(frozen=True, slots=True)
class _Position:
    """Where a session's indexing stopped (a row of ``sessions``)."""

    title: str
    generation: int
    log_inode: int
    log_offset: int
    next_commit: int
    next_seq: int
    open_turn: str | None


class SearchIndex:
    """A rebuildable cache at ``<root>/search.sqlite3`` (see the module docstring).

    Args:
        root: the data root (the folder holding ``sessions/``).
        busy_timeout: seconds to wait for another process's write before giving up.
    """

    def __init__(self, root: Path, *, busy_timeout: float = BUSY_TIMEOUT) -> None:
        self.root = Path(root)
        self.busy_timeout = busy_timeout
        self.path = self.root / INDEX_NAME
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._store: SessionStore | None = None
        self._needs_rebuild = False
        self.in_memory = False
        """True when the data folder could not hold the index and it lives in memory."""

    # -- keeping current ---------------------------------------------------

    def catch_up(self, store: SessionStore, session_id: str) -> int:
        """Index a session's commits since the last indexed one; return how many were read.

        Raises:
            InvalidSessionId, SessionNotFound, InvalidManifest, UnsafePath: from the store.
            SearchIndexUnavailable: the index is locked or cannot be written.
        """
        with self._lock:
            self._store = store
            manifest = store.manifest(session_id)
            return self._guarded(lambda conn: self._catch_up_session(conn, store, manifest))

    def catch_up_all(
        self, store: SessionStore, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Catch every readable session up, oldest first; forget sessions that are gone.

        A session whose manifest or log cannot be read is skipped (logged) and
        keeps what was indexed of it. Cheap when everything is current: one
        manifest read, one ``fstat`` and one row lookup per session. The lock
        is taken per session, so searches from other threads are answered
        while a long catch-up (a rebuild) runs, from what is indexed so far.

        Args:
            store: the sessions to index.
            progress: called with ``(done, total)`` after each session.

        Returns:
            How many commits were indexed.

        Raises:
            SearchIndexUnavailable: the index is locked or cannot be written.
        """
        with self._lock:
            self._store = store
            manifests = self._guarded(lambda conn: _sessions_to_index(conn, store))
        indexed = 0
        for done, manifest in enumerate(manifests, start=1):
            with self._lock:
                indexed += self._guarded(
                    functools.partial(self._catch_up_readable, store=store, manifest=manifest)
                )
            time.sleep(0)  # let a search waiting for the lock in. (A rebuild takes minutes.)
            if progress is not None:
                progress(done, len(manifests))
        return indexed

    def forget(self, session_id: str) -> None:
        """Drop a session (deleted or trashed); messages other sessions share stay."""
        with self._lock:

            def drop(conn: sqlite3.Connection) -> None:
                with _transaction(conn):
                    _forget(conn, session_id)

            self._guarded(drop)

    def merges(self) -> tuple[MergedBranch, ...]:
        """Every merge indexed so far, oldest first (as current as the last catch-up).

        Raises:
            SearchIndexUnavailable: the index is locked or cannot be read.
        """
        with self._lock:
            rows = self._guarded(
                lambda conn: conn.execute(
                    "SELECT child_session_id, into_session_id, merge_sequence, ts FROM merges "
                    "ORDER BY ts, into_session_id, merge_sequence"
                ).fetchall()
            )
        return tuple(MergedBranch(str(c), str(i), int(q), float(t)) for c, i, q, t in rows)

    # -- searching ---------------------------------------------------------

    def search(self, query: str, *, limit: int = 20, session_id: str | None = None) -> SearchResult:
        """The messages and titles matching every white-space separated term of ``query``.

        Args:
            query: text as the user typed it (never FTS5 syntax).
            limit: how many hits at most (1…:data:`MAX_LIMIT`).
            session_id: only messages this conversation contains, shown in it.

        Raises:
            InvalidSearch: an empty query or a limit out of range.
            SearchIndexUnavailable: the index is locked or cannot be read.
        """
        terms = query_terms(query, limit)
        with self._lock:
            return self._guarded(lambda conn: run_query(conn, terms, limit, session_id))

    def close(self) -> None:
        """Close the connection (idempotent; the next call opens it again)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> SearchIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the connection, and what to do when SQLite refuses ---------------

    def _guarded(self, action: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``action`` on the connection; a corrupt index is set aside, rebuilt, retried."""
        for attempt in (1, 2):
            try:
                conn = self._connection()
                if self._needs_rebuild:
                    self._needs_rebuild = False
                    self._rebuild(conn)
                return action(conn)
            except sqlite3.DatabaseError as exc:
                if attempt == 1 and _is_corrupt(exc):
                    log.warning("search index %s is damaged (%s); rebuilding it", self.path, exc)
                    self._set_aside()
                    continue
                if attempt == 1 and _primary(exc) == _SQLITE_FULL and not self.in_memory:
                    self._give_back_space()
                    log.warning("search index %s: the disk is full; kept in memory", self.path)
                    self.in_memory = self._needs_rebuild = True
                    continue
                raise _unavailable(self.path, exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _give_back_space(self) -> None:
        """After a full disk: leave no write-ahead log behind, so other commands have room.

        The failed transaction is already rolled back. What the WAL still holds
        is checkpointed into the index (``TRUNCATE`` empties the file) and the
        connection closed. When even the checkpoint finds no room, the index is
        only a cache: it is deleted, WAL and all, if no other process has it
        open (an exclusive lock says so), and rebuilt by a later search.
        """
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        with contextlib.suppress(OSError):
            if os.stat(f"{self.path}-wal").st_size == 0:
                return
        try:
            probe = sqlite3.connect(str(self.path), timeout=0, isolation_level=None)
        except sqlite3.Error:
            return
        try:
            probe.execute("PRAGMA locking_mode=EXCLUSIVE")
            probe.execute("BEGIN EXCLUSIVE")  # refused while any other connection uses it
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(OSError):
                    os.unlink(f"{self.path}{suffix}")
            log.warning("search index %s: no room to keep it; deleted", self.path)
        except sqlite3.Error:
            pass
        finally:
            probe.close()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        for attempt in (1, 2):
            try:
                self._conn = self._open()
                return self._conn
            except sqlite3.DatabaseError as exc:
                if attempt == 1 and _is_corrupt(exc):
                    log.warning("search index %s is damaged (%s); rebuilding it", self.path, exc)
                    self._set_aside()
                    continue
                if _primary(exc) == _SQLITE_FULL and not self.in_memory:
                    log.warning("search index %s: the disk is full; kept in memory", self.path)
                    self._give_back_space()
                    self.in_memory = True
                    continue
                if _primary(exc) in (_SQLITE_READONLY, _SQLITE_CANTOPEN) and not self.in_memory:
                    log.warning(
                        "search index %s cannot be written (%s); kept in memory", self.path, exc
                    )
                    self.in_memory = True
                    continue
                raise _unavailable(self.path, exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _open(self) -> sqlite3.Connection:
        """Open (creating or upgrading) the index; raises SQLite's error as it comes."""
        if self.in_memory:
            target = ":memory:"
        else:
            if os.path.islink(self.path):
                raise UnsafePath(
                    f"{self.path} is a symbolic link; it is not followed", path=str(self.path)
                )
            with contextlib.suppress(OSError):
                self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            _create_private(self.path)
            target = str(self.path)
        conn = sqlite3.connect(
            target, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            # The triggers derive the short-query table's text with this function.
            conn.create_function(_HEADS_FUNCTION, 1, short_query_text, deterministic=True)
            if not self.in_memory:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")  # a cache: a lost tail is re-read
                # A bounded WAL: a first build on a nearly full disk must not take
                # several times the index's own size in a write-ahead log.
                conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_LIMIT_PAGES:d}")
                conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_PAGES * 4096:d}")
            if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
                return conn  # no write lock taken: a busy writer elsewhere never stops a search
            with _transaction(conn):
                (version,) = conn.execute("PRAGMA user_version").fetchone()
                if version != SCHEMA_VERSION:
                    # A new file, or another version (1 kept it in a table, so reads 0):
                    # start empty; the next catch-up (the app's runs in the background)
                    # fills it from the logs.
                    _drop_everything(conn)
                    for statement in _SCHEMA:
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION:d}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _set_aside(self) -> None:
        """Move a corrupt index (and its WAL files) aside; the next open starts afresh."""
        self._needs_rebuild = True
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None
        if self.in_memory:
            return
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = self.path.with_name(f"{INDEX_NAME}.bad-{stamp}-{os.getpid()}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise SearchIndexUnavailable(
                f"the damaged search index {self.path} could not be moved aside: {exc}",
                path=str(self.path),
            ) from exc
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    def _rebuild(self, conn: sqlite3.Connection) -> None:
        """Index every session into the fresh index (after a corrupt one was set aside)."""
        store = self._store if self._store is not None else SessionStore(self.root, prepare=False)
        for manifest in _sessions_to_index(conn, store):
            self._catch_up_readable(conn, store, manifest)

    # -- indexing ----------------------------------------------------------

    def _catch_up_readable(
        self, conn: sqlite3.Connection, store: SessionStore, manifest: Manifest
    ) -> int:
        """:meth:`_catch_up_session`, skipping (and logging) a session that cannot be read."""
        try:
            return self._catch_up_session(conn, store, manifest)
        except BranchwiseError as exc:
            log.warning("search: session %s skipped: %s", manifest.session_id, exc.message)
            return 0

    def _catch_up_session(
        self, conn: sqlite3.Connection, store: SessionStore, manifest: Manifest
    ) -> int:
        session_id = manifest.session_id
        directory = store.session_dir(session_id)
        _device, inode, size = log_identity(directory, manifest)
        seen = _position(conn, session_id)
        if seen is not None and (seen.generation, seen.log_inode, seen.log_offset) == (
            manifest.generation,
            inode,
            size,
        ):
            return 0  # current: no write transaction (none to wait for, none to hold up)
        with _transaction(conn):
            position = _position(conn, session_id)
            if position is not None and (
                position.generation != manifest.generation
                or position.log_inode != inode
                or size < position.log_offset
            ):
                _forget(conn, session_id)  # the log was replaced: index it afresh
                position = None
            if position is None:
                position = _Position(manifest.title, manifest.generation, inode, 0, 1, 1, None)
                _index_title(conn, session_id, manifest.title)
            elif size == position.log_offset:
                return 0
            start = position.log_offset
            tail = read_log_from(directory, manifest, start) if size else b""
            indexed, done = _index_batch(conn, session_id, manifest, position, tail, store.root)
        # The rest of the tail, a batch per transaction: each commit lets the WAL be
        # checkpointed and cut back, so indexing a long log never needs more disk
        # than one batch beyond the index itself.
        while indexed and done < len(tail):
            with _transaction(conn):
                position = _position(conn, session_id)
                if position is None or position.log_offset != start + done:
                    break  # another process indexed this session meanwhile
                frames, more = _index_batch(
                    conn, session_id, manifest, position, tail[done:], store.root
                )
            indexed, done = indexed + frames, done + more
            if not frames:
                break
        return indexed


# -- indexing, one transaction per session ----------------------------------------------


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (rolled back on any error)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _sessions_to_index(conn: sqlite3.Connection, store: SessionStore) -> list[Manifest]:
    """Every readable session, oldest first, after forgetting the indexed ones now gone."""
    manifests: list[Manifest] = []
    unreadable: set[str] = set()
    for item in store.iter_manifests():
        if isinstance(item, Manifest):
            manifests.append(item)
        else:
            unreadable.add(str(item.details.get("sessionId", "")))
    manifests.sort(key=lambda m: (m.created_at, m.session_id))
    present = {m.session_id for m in manifests} | unreadable
    known = [row[0] for row in conn.execute("SELECT session_id FROM sessions")]
    gone = [session_id for session_id in known if session_id not in present]
    if gone:
        with _transaction(conn):
            for session_id in gone:
                _forget(conn, session_id)
    return manifests


def _position(conn: sqlite3.Connection, session_id: str) -> _Position | None:
    row = conn.execute(
        "SELECT title, generation, log_inode, log_offset, next_commit, next_seq, open_turn "
        "FROM sessions WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    return _Position(*row) if row is not None else None


def _with_attachments(root: Path, text: str, refs: tuple[AttachmentRef, ...]) -> str:
    """A prompt's text as indexed: then each file's name, and a text file's or a PDF's text.

    A file whose bytes are gone is found by its name only.
    """
    if not refs:
        return text
    parts = [text]
    blobs = BlobStore(root)
    for ref in refs:
        parts.append(ref.name)
        if not ref.is_image:
            with contextlib.suppress(BranchwiseError):
                parts.append(attachment_text(blobs, ref))
    return "\n\n".join(parts)


def _index_batch(
    conn: sqlite3.Connection,
    session_id: str,
    manifest: Manifest,
    position: _Position,
    tail: bytes,
    root: Path,
) -> tuple[int, int]:
    """Index the first :data:`BATCH_BYTES` or so of ``tail`` (whole frames, at least one).

    Returns:
        The frames indexed and the bytes of ``tail`` they took.
    """
    end = BATCH_BYTES
    while True:
        frames, consumed = _index_tail(conn, session_id, manifest, position, tail[:end], root)
        if frames or end >= len(tail):
            return frames, consumed
        end *= 4  # one frame longer than a batch


def _index_tail(
    conn: sqlite3.Connection,
    session_id: str,
    manifest: Manifest,
    position: _Position,
    tail: bytes,
    root: Path,
) -> tuple[int, int]:
    """Index what the whole frames of ``tail`` (the log from the remembered offset on) changed.

    Returns:
        The whole frames read and their bytes (a torn or cut last frame is left).
    """
    # Message ids are unique per lineage: a fork shares its root's ids, and two unrelated
    # sessions reusing an id (an import, a test) stay two messages.
    lineage = f"{manifest.root_session_id or session_id}/"
    read = read_tail(
        tail,
        TailPosition(position.next_commit, position.next_seq, position.open_turn, position.title),
        streamed_before=lambda turn_id: _streamed_answer(conn, lineage, turn_id),
        text_before=lambda message_id: _indexed_text(conn, lineage + message_id),
    )
    if read.frames == 0 and position.log_offset != 0:
        return 0, 0  # nothing new but a growing (or torn) last frame
    if read.texts:
        rows = [
            (
                lineage + (text.key or text.message_id)
                if text.shared
                else f"legacy/{session_id}/{text.message_id}",
                text.message_id,
                text.role,
                text.turn_id,
                _with_attachments(root, text.text, text.attachments),
            )
            for text in read.texts
        ]
        conn.executemany(
            "INSERT INTO messages(key, message_id, role, turn_id, content) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET content = excluded.content "
            "WHERE messages.content IS NOT excluded.content",
            rows,
        )
        conn.executemany(
            "INSERT OR IGNORE INTO message_sessions(message, session_id) "
            "SELECT id, ? FROM messages WHERE key = ?",
            [(session_id, row[0]) for row in rows],
        )
    if read.merges:
        conn.executemany(
            "INSERT OR REPLACE INTO merges(into_session_id, merge_sequence, child_session_id, ts) "
            "VALUES (?, ?, ?, ?)",
            [(session_id, m.sequence, m.child_session_id, m.at) for m in read.merges],
        )
    end = read.end
    if end.title != position.title or position.log_offset == 0:
        _index_title(conn, session_id, end.title)
    conn.execute(
        "INSERT OR REPLACE INTO sessions(session_id, title, created_at, generation, log_inode, "
        "log_offset, next_commit, next_seq, open_turn) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            session_id,
            end.title,
            manifest.created_at,
            position.generation,
            position.log_inode,
            position.log_offset + read.consumed,
            end.next_commit,
            end.next_seq,
            end.open_turn,
        ),
    )
    return read.frames, read.consumed


def _streamed_answer(conn: sqlite3.Connection, lineage: str, turn_id: str) -> str | None:
    """The message id of the answer a turn was streaming when its last deltas were indexed.

    Rows are read newest first and lazily: the answer being streamed is among
    the last rows written, so this stops after a few, with no index on turns.
    """
    rows = conn.execute(
        "SELECT key, message_id FROM messages WHERE turn_id = ? AND role = 'assistant' "
        "ORDER BY id DESC",
        (turn_id,),
    )
    return next((str(m) for key, m in rows if str(key).startswith(lineage)), None)


def _indexed_text(conn: sqlite3.Connection, key: str) -> str:
    """The text indexed for a message so far ("" if none)."""
    row = conn.execute("SELECT content FROM messages WHERE key = ?", (key,)).fetchone()
    return str(row[0]) if row is not None else ""


def _index_title(conn: sqlite3.Connection, session_id: str, title: str) -> None:
    key = f"title/{session_id}"
    conn.execute(
        "INSERT INTO messages(key, message_id, role, turn_id, content) "
        "VALUES (?, '', 'title', NULL, ?) "
        "ON CONFLICT(key) DO UPDATE SET content = excluded.content "
        "WHERE messages.content IS NOT excluded.content",
        (key, title),
    )
    conn.execute(
        "INSERT OR IGNORE INTO message_sessions(message, session_id) "
        "SELECT id, ? FROM messages WHERE key = ?",
        (session_id, key),
    )
    # A session row must exist for the title to show before any frame is indexed.
    conn.execute("UPDATE sessions SET title = ? WHERE session_id = ?", (title, session_id))


def _forget(conn: sqlite3.Connection, session_id: str) -> None:
    """Remove a session: its links, the messages only it held, its position."""
    conn.execute(
        "DELETE FROM messages WHERE id IN "
        "(SELECT message FROM message_sessions WHERE session_id = ?1) "
        "AND NOT EXISTS (SELECT 1 FROM message_sessions other "
        "WHERE other.message = messages.id AND other.session_id != ?1)",
        (session_id,),
    )
    conn.execute("DELETE FROM message_sessions WHERE session_id = ?", (session_id,))
    conn.execute("DELETE FROM merges WHERE into_session_id = ?", (session_id,))
    conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))


def _drop_everything(conn: sqlite3.Connection) -> None:
    """Drop an index of another schema version (it is a cache: rebuilt from the logs).

    Virtual tables go first and take their shadow tables with them.
    """
    rows = conn.execute(
        "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'trigger', 'index') "
        "AND name NOT LIKE 'sqlite_%' ORDER BY sql NOT LIKE 'CREATE VIRTUAL TABLE%'"
    ).fetchall()
    for kind, name in rows:
        with contextlib.suppress(sqlite3.OperationalError):  # gone with its table
            conn.execute(f'DROP {kind.upper()} IF EXISTS "{name}"')


# -- searching --------------------------------------------------------------------------


# -- errors -----------------------------------------------------------------------------


def _create_private(path: Path) -> None:
    """Create the index file 0600 (as every file of the data folder) before SQLite opens it.

    SQLite gives its ``-wal`` and ``-shm`` files the index file's mode. A
    folder that cannot be written is SQLite's to report (the index is then
    kept in memory).
    """
    with contextlib.suppress(OSError):
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        os.close(fd)


def _primary(exc: sqlite3.Error) -> int:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else -1


def _is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    if _primary(exc) in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return True
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def _unavailable(path: Path, exc: sqlite3.Error) -> SearchIndexUnavailable:
    return SearchIndexUnavailable(
        f"the search index {path} cannot be used now: {exc}",
        path=str(path),
        reason=getattr(exc, "sqlite_errorname", type(exc).__name__),
    )
