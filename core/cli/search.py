"""``branchwise search``, and keeping the search index current after the commands that write.

The index (:mod:`~branchwise.core.search`) is a cache: a writing command
catches up the sessions it touched once its write is durable, best effort,
so an index that cannot be written never fails the write (it is logged, and
the next ``search`` catches up whatever was missed).
"""

from __future__ import annotations

import argparse
import logging
import sqlite3
from typing import Any

from branchwise.core.errors import BranchwiseError, SessionNotFound
from branchwise.core.ids import validate_session_id
from branchwise.core.search import SearchIndex
from branchwise.core.store.store import SessionStore

log = logging.getLogger(__name__)


def register_top(top: argparse._SubParsersAction) -> None:
    """Add ``search QUERY [--limit N] [--session ID]``."""
    search = top.add_parser("search", help="search every conversation's messages and titles")
    search.add_argument("query", help="words or characters to find (searched as plain text)")
    search.add_argument("--limit", type=int, default=20, help="most hits to print (1-1000)")
    search.add_argument("--session", help="only this conversation's messages")
    search.set_defaults(func=cmd_search)


def cmd_search(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Catch the index up with every session, then search it; best hits first."""
    session_id = None
    if args.session is not None:
        session_id = validate_session_id(args.session)
        if not store.exists(session_id):
            raise SessionNotFound(f"no session {session_id}", sessionId=session_id)
    with SearchIndex(store.root) as index:
        index.catch_up_all(store)
        return index.search(args.query, limit=args.limit, session_id=session_id).to_json()


def index_written(store: SessionStore, *session_ids: str) -> None:
    """Catch the index up with sessions a command just wrote (never fails the command)."""
    try:
        with SearchIndex(store.root) as index:
            for session_id in session_ids:
                index.catch_up(store, session_id)
    except (BranchwiseError, sqlite3.Error, OSError) as exc:
        log.warning("the search index was not updated after the write: %s", exc)
