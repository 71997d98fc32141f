"""Full-text search over every conversation: a rebuildable SQLite FTS5 cache.

STAND-IN written for the desktop side of issue 15 (the core version replaces
it); it implements the agreed interface in the simplest way that works. The
index lives at ``<root>/search.sqlite3``; one row per message and one per
title, tokenized as trigrams so Chinese text (no spaces) is found too.
Queries shorter than three characters fall back to a ``LIKE`` scan.

A message a branch inherited keeps its message id, so a hit is shown once,
in the newest conversation holding it, with the others in ``also_in``.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from branchwise.core.errors import BranchwiseError, SearchIndexUnavailable
from branchwise.core.store.manifest import Manifest
from branchwise.core.store.store import SessionStore

FILE_NAME = "search.sqlite3"
SNIPPET_BEFORE = 40
SNIPPET_CHARS = 160
_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions(
    session_id TEXT PRIMARY KEY, title TEXT NOT NULL, created REAL NOT NULL,
    indexed_seq INTEGER NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(
    content, session_id UNINDEXED, message_id UNINDEXED, turn_id UNINDEXED,
    role UNINDEXED, tokenize='trigram');
"""


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One message (or title) that matches a query."""

    session_id: str
    title: str
    turn_id: str | None
    message_id: str
    role: str
    snippet: str
    spans: tuple[tuple[int, int], ...]
    also_in: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The wire form."""
        return {
            "sessionId": self.session_id,
            "title": self.title,
            "turnId": self.turn_id,
            "messageId": self.message_id,
            "role": self.role,
            "snippet": self.snippet,
            "alsoIn": list(self.also_in),
        }


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The hits of one query (at most ``limit``) and how many there were."""

    hits: tuple[SearchHit, ...]
    total: int

    def to_json(self) -> dict[str, Any]:
        """The wire form."""
        return {"hits": [hit.to_json() for hit in self.hits], "total": self.total}


class SearchIndex:
    """A rebuildable cache at ``<root>/search.sqlite3``."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / FILE_NAME
        self._lock = threading.Lock()
        self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        for attempt in range(2):
            try:
                db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
                try:
                    db.executescript(_SCHEMA)
                    db.execute("SELECT count(*) FROM docs").fetchone()
                    db.execute("SELECT count(*) FROM sessions").fetchone()
                except BaseException:
                    db.close()
                    raise
                return db
            except sqlite3.DatabaseError as exc:
                if attempt or not self.path.exists():
                    raise SearchIndexUnavailable(f"the search index cannot be used: {exc}") from exc
                try:
                    self.path.rename(self.path.with_name(f"{FILE_NAME}.bad-{int(time.time())}"))
                except OSError as moved:
                    raise SearchIndexUnavailable(f"cannot move a broken index: {moved}") from moved
        raise AssertionError("unreachable")

    def catch_up(self, store: SessionStore, session_id: str) -> int:
        """Index what a session committed since last time; returns how many commits."""
        try:
            snapshot = store.read(session_id)
        except BranchwiseError:
            self.forget(session_id)
            return 0
        frames = snapshot.scan.frames
        last_seq = int(frames[-1].events[-1]["seq"]) if frames and frames[-1].events else 0
        with self._lock:
            row = self._db.execute(
                "SELECT indexed_seq, title FROM sessions WHERE session_id=?", (session_id,)
            ).fetchone()
            if row is not None and row[0] == last_seq and row[1] == snapshot.title:
                return 0
            done = sum(1 for f in frames if f.events and f.events[-1]["seq"] > (row or (0,))[0])
            self._db.execute("BEGIN")
            self._db.execute("DELETE FROM docs WHERE session_id=?", (session_id,))
            self._db.executemany(
                "INSERT INTO docs(content, session_id, message_id, turn_id, role) "
                "VALUES (?, ?, ?, ?, ?)",
                [
                    (m.content, session_id, m.message_id, m.turn_id, m.role)
                    for m in snapshot.projection.messages
                    if m.role in ("user", "assistant") and m.content
                ]
                + [(snapshot.title, session_id, f"title:{session_id}", None, "title")],
            )
            self._db.execute(
                "INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?)",
                (session_id, snapshot.title, snapshot.manifest.created_at, last_seq),
            )
            self._db.execute("COMMIT")
        return done

    def catch_up_all(
        self, store: SessionStore, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Catch every session up (and forget the gone ones); ``progress(done, total)``."""
        ids = [m.session_id for m in store.iter_manifests() if isinstance(m, Manifest)]
        with self._lock:
            known = {r[0] for r in self._db.execute("SELECT session_id FROM sessions")}
        for gone in known - set(ids):
            self.forget(gone)
        total = 0
        for done, session_id in enumerate(ids):
            if progress is not None:
                progress(done, len(ids))
            total += self.catch_up(store, session_id)
        if progress is not None:
            progress(len(ids), len(ids))
        return total

    def forget(self, session_id: str) -> None:
        """Drop a session from the index."""
        with self._lock:
            self._db.execute("DELETE FROM docs WHERE session_id=?", (session_id,))
            self._db.execute("DELETE FROM sessions WHERE session_id=?", (session_id,))

    def search(self, query: str, *, limit: int = 20, session_id: str | None = None) -> SearchResult:
        """The messages and titles containing ``query`` (case-insensitive), newest first."""
        query = query.strip()
        if not query:
            return SearchResult((), 0)
        if len(query) >= 3:
            where, arg = "docs MATCH ?", '"' + query.replace('"', '""') + '"'
        else:
            pattern = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            where, arg = "content LIKE ? ESCAPE '\\'", f"%{pattern}%"
        sql = (
            "SELECT docs.message_id, docs.session_id, docs.turn_id, docs.role, docs.content, "
            "sessions.title, sessions.created FROM docs JOIN sessions USING(session_id) "
            f"WHERE {where}"
        )
        with self._lock:
            rows = self._db.execute(sql, (arg,)).fetchall()
        by_message: dict[str, list[tuple[Any, ...]]] = {}
        for row in rows:
            by_message.setdefault(row[0], []).append(row)
        hits: list[tuple[float, SearchHit]] = []
        for message_id, holders in by_message.items():
            holders.sort(key=lambda r: r[6], reverse=True)
            shown = next((r for r in holders if r[1] == session_id), holders[0])
            snippet, spans = _snippet(shown[4], query)
            others = tuple(r[1] for r in holders if r is not shown)
            hit = SearchHit(
                shown[1], shown[5], shown[2], message_id, shown[3], snippet, spans, others
            )
            hits.append((shown[6], hit))
        hits.sort(key=lambda pair: pair[0], reverse=True)
        return SearchResult(tuple(hit for _, hit in hits[:limit]), len(hits))

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()


def _snippet(content: str, query: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    text = " ".join(content.split())
    found = text.casefold().find(query.casefold())
    start = max(0, found - SNIPPET_BEFORE) if found >= 0 else 0
    snippet = text[start : start + SNIPPET_CHARS]
    folded, needle = snippet.casefold(), query.casefold()
    spans = []
    at = folded.find(needle)
    while at >= 0 and len(folded) == len(snippet):
        spans.append((at, at + len(query)))
        at = folded.find(needle, at + len(needle))
    return snippet, tuple(spans)
