"""``branchwise session merge CHILD [--into PARENT] (--turn TURN… | --summary [TEXT])``."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from branchwise.core.cli.models import add_provider_options, provider_from_args
from branchwise.core.conversation.merge import answers_of, merge_back, write_summary
from branchwise.core.ids import new_id, validate_session_id
from branchwise.core.store.store import SessionStore

GENERATE = object()
"""``--summary`` given without text: the configured model writes it."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``session merge``."""
    parser = sub.add_parser(
        "merge", help="bring a branch's answers or a summary back into its parent"
    )
    parser.add_argument("child", metavar="CHILD")
    parser.add_argument("--into", metavar="PARENT", help="an ancestor (default: the parent)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--turn", action="append", metavar="TURN", help="bring back this turn's answer (repeat)"
    )
    what.add_argument(
        "--summary",
        nargs="?",
        const=GENERATE,
        metavar="TEXT",
        help="bring back this summary (without TEXT the configured model writes one)",
    )
    parser.add_argument("--operation-id", metavar="OP", help="retry-safe id of this merge")
    add_provider_options(parser)
    parser.set_defaults(func=cmd_merge)


def cmd_merge(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """``{"parentSessionId", "mergeSequence", "created"}``."""
    child = validate_session_id(args.child)
    if args.turn:
        content, kind = answers_of(store, child, args.turn), "answer"
    elif args.summary is GENERATE:
        projection = store.read(child).projection
        provider = provider_from_args(store, args, projection.settings)
        content, kind = asyncio.run(write_summary(projection, provider)), "summary"
    else:
        content, kind = args.summary, "summary"
    operation = new_id("op") if args.operation_id is None else args.operation_id
    return merge_back(store, child, args.into, content, kind, operation).to_json()
