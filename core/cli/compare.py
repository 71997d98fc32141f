"""``branchwise session compare A B``: two conversations from their last common fork point."""

from __future__ import annotations

import argparse
from typing import Any

from branchwise.core.conversation.compare import compare
from branchwise.core.store.store import SessionStore


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``session compare``."""
    parser = sub.add_parser(
        "compare", help="two conversations of one tree, side by side from where they split"
    )
    parser.add_argument("left", metavar="A")
    parser.add_argument("right", metavar="B")
    parser.set_defaults(func=cmd_compare)


def cmd_compare(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """``{"common": {"sessionId", "turnId", "boundarySequence"} | null, "left", "right"}``."""
    return compare(store, args.left, args.right).to_json()
