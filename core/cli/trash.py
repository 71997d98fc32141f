"""``branchwise session delete|trash|restore|purge``: the Trash from the command line.

Shapes printed:

* ``session delete ID…`` → ``{"trashed": [ID, …]}``
* ``session delete ID --with-branches`` → ``{"trashed": [ID, …]}``: the
  conversation and every branch below it, leaves first (one action: all or none)
* ``session trash`` → ``{"sessions": [{"sessionId", "title", "kind",
  "parentSessionId", "createdAt", "trashedAt"}, …]}``, most recently trashed first
* ``session trash --empty`` → ``{"purged": [ID, …]}`` (asks nothing)
* ``session restore ID…`` → ``{"restored": [ID, …]}``
* ``session purge ID…`` → ``{"purged": [ID, …]}``

Every id is checked before anything moves, so a bad one among several
changes nothing. The search index forgets a trashed session at once, best
effort; a restored one is indexed again by the next ``search`` (it is a cache).
"""

from __future__ import annotations

import argparse
import logging
import sqlite3
from collections.abc import Callable
from typing import Any

from branchwise.core.conversation.prune import prune
from branchwise.core.errors import (
    BranchwiseError,
    LeaseHeld,
    NotTrashed,
    SessionNotFound,
    SessionTrashed,
)
from branchwise.core.ids import validate_session_id
from branchwise.core.search.index import SearchIndex
from branchwise.core.store.blob_collection import collect_blobs
from branchwise.core.store.store import SessionStore
from branchwise.core.store.trash import Trash

log = logging.getLogger(__name__)


def register(session_sub: argparse._SubParsersAction) -> None:
    """Add the Trash subcommands under ``session``."""
    delete = session_sub.add_parser("delete", help="move sessions to the Trash (restorable)")
    delete.add_argument("session_ids", nargs="+", metavar="session_id")
    delete.add_argument(
        "--with-branches",
        action="store_true",
        help="also every branch below each session (all of them or none)",
    )
    delete.set_defaults(func=cmd_delete)

    trash = session_sub.add_parser("trash", help="list the Trash, or empty it with --empty")
    trash.add_argument(
        "--empty", action="store_true", help="delete everything in the Trash for good"
    )
    trash.set_defaults(func=cmd_trash)

    restore = session_sub.add_parser("restore", help="move sessions back from the Trash")
    restore.add_argument("session_ids", nargs="+", metavar="session_id")
    restore.set_defaults(func=cmd_restore)

    purge = session_sub.add_parser("purge", help="delete trashed sessions for good")
    purge.add_argument("session_ids", nargs="+", metavar="session_id")
    purge.set_defaults(func=cmd_purge)


def _checked(ids: list[str], check: Callable[[str], None]) -> list[str]:
    """Validate every id and run ``check`` on each before anything is moved (no duplicates)."""
    checked = list(dict.fromkeys(validate_session_id(i) for i in ids))
    for session_id in checked:
        check(session_id)
    return checked


def cmd_delete(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Move each session to the Trash; its branches stay whole."""
    trash = Trash(store)

    def live(session_id: str) -> None:
        if not store.session_dir(session_id).is_dir():
            if trash.contains(session_id):
                raise SessionTrashed(f"session {session_id} is in the Trash", sessionId=session_id)
            raise SessionNotFound(f"no session {session_id}", sessionId=session_id)
        if store.is_being_written(session_id):
            raise LeaseHeld(
                f"session {session_id} is being written by another process (a running turn?); "
                "stop it first",
                sessionId=session_id,
            )

    ids = _checked(args.session_ids, live)
    if args.with_branches:
        trashed = [moved for session_id in ids for moved in _prune_live(store, session_id)]
        _forget(store, trashed)
        return {"trashed": trashed}
    trashed = [trash.trash(session_id).session_id for session_id in ids]
    _forget(store, trashed)
    return {"trashed": trashed}


def _prune_live(store: SessionStore, session_id: str) -> list[str]:
    """One subtree (an id an earlier subtree already took is skipped)."""
    if not store.session_dir(session_id).is_dir():
        return []
    return prune(store, session_id)


def cmd_trash(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """List the Trash, or empty it (``--empty``; nothing is asked)."""
    trash = Trash(store)
    if args.empty:
        trash.sweep()
        purged = trash.empty()
        collect_blobs(store)  # attachments only those conversations referred to
        return {"purged": purged}
    return {"sessions": [entry.to_json() for entry in trash.entries()]}


def _in_trash(store: SessionStore, trash: Trash) -> Callable[[str], None]:
    def check(session_id: str) -> None:
        if trash.contains(session_id):
            return
        if store.session_dir(session_id).is_dir():
            raise NotTrashed(f"session {session_id} is not in the Trash", sessionId=session_id)
        raise SessionNotFound(f"no session {session_id}", sessionId=session_id)

    return check


def cmd_restore(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Move each session back from the Trash, unchanged."""
    trash = Trash(store)
    ids = _checked(args.session_ids, _in_trash(store, trash))
    for session_id in ids:
        trash.restore(session_id)
    return {"restored": ids}


def cmd_purge(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Delete each trashed session for good."""
    trash = Trash(store)
    ids = _checked(args.session_ids, _in_trash(store, trash))
    for session_id in ids:
        trash.purge(session_id)
    collect_blobs(store)  # attachments nothing refers to any more
    return {"purged": ids}


def _forget(store: SessionStore, session_ids: list[str]) -> None:
    """Drop trashed sessions from the search index (never fails the command)."""
    try:
        with SearchIndex(store.root) as index:
            for session_id in session_ids:
                index.forget(session_id)
    except (BranchwiseError, sqlite3.Error, OSError) as exc:
        log.warning("the search index still lists a trashed session: %s", exc)
