"""``branchwise search``: catch the index up with the logs, then search it.

The index (:mod:`~branchwise.core.search.index`) is a cache of the logs. The
commands that write (``session new|say|fork|child|edit|...``) do not touch
it: a turn's commits cost what they cost without search, and the next
``search`` reads every commit added since the last one it indexed, so a
process that died between a commit and any indexing loses nothing.

A query is text, never an option: ``search -x`` searches for ``-x``
(:func:`query_from_leftover` takes the one token the parser did not know;
``search -- --limit`` searches for ``--limit``).
"""

from __future__ import annotations

import argparse
from typing import Any

from branchwise.core.conversation.views import label_hits
from branchwise.core.errors import InvalidArgument, SessionNotFound
from branchwise.core.ids import validate_session_id
from branchwise.core.search.index import SearchIndex
from branchwise.core.store.store import SessionStore


def register_top(top: argparse._SubParsersAction) -> None:
    """Add ``search QUERY [--limit N] [--session ID]``."""
    search = top.add_parser("search", help="search every conversation's messages and titles")
    search.add_argument(
        "query",
        nargs="?",
        help="words or characters to find (searched as plain text, a leading - included)",
    )
    search.add_argument("--limit", type=int, default=20, help="most hits to print (1-1000)")
    search.add_argument("--session", help="only this conversation's messages")
    search.set_defaults(func=cmd_search)


def query_from_leftover(args: argparse.Namespace, leftover: list[str]) -> bool:
    """Take a query that starts with ``-`` (which the parser left over) as the query.

    Returns:
        Whether ``leftover`` was exactly that query (``args.query`` is then set);
        anything else is left for the parser to refuse as usual.
    """
    if getattr(args, "command", None) != "search" or args.query is not None:
        return False
    if len(leftover) != 1:
        return False
    args.query = leftover[0]
    return True


def cmd_search(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Catch the index up with every session, then search it; best hits first."""
    if args.query is None:
        raise InvalidArgument("search needs a QUERY", argument="query", value="")
    session_id = None
    if args.session is not None:
        session_id = validate_session_id(args.session)
        if not store.exists(session_id):
            raise SessionNotFound(f"no session {session_id}", sessionId=session_id)
    with SearchIndex(store.root) as index:
        index.catch_up_all(store)
        answer = index.search(args.query, limit=args.limit, session_id=session_id).to_json()
    label_hits(store, answer["hits"])
    return answer
