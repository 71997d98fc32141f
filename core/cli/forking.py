"""``branchwise session targets|fork|child|lineage|tree|map`` (docs/cli.md, "Branching")."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from branchwise.core.conversation.family_map import family_map
from branchwise.core.conversation.names import new_branch_name_from_store
from branchwise.core.conversation.views import session_lineage, session_targets, session_tree
from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import fork_targets
from branchwise.core.ids import new_id, validate_session_id
from branchwise.core.lineage import create_child
from branchwise.core.store.manifest import given_title
from branchwise.core.store.store import SessionStore


def register(session_sub: argparse._SubParsersAction) -> None:
    """Add the fork and lineage subcommands under ``session``."""
    targets = session_sub.add_parser("targets", help="fork targets of every turn")
    targets.add_argument("session_id")
    targets.set_defaults(func=cmd_targets)

    fork_cmd = session_sub.add_parser(
        "fork", help="fork a session at a finished turn, or at its start"
    )
    fork_cmd.add_argument("session_id")
    where = fork_cmd.add_mutually_exclusive_group(required=True)
    where.add_argument("--turn", help="the turn id to fork at")
    where.add_argument(
        "--at-start",
        action="store_true",
        help="fork before the first turn: a child inheriting nothing (seedLength 0)",
    )
    fork_cmd.add_argument(
        "--boundary", type=int, help="boundary sequence (default: the turn's current one)"
    )
    fork_cmd.add_argument(
        "--generation", type=int, help="expected source generation (default: the current one)"
    )
    fork_cmd.add_argument(
        "--operation-id", help="idempotency key; reuse it to retry (default: a new one)"
    )
    fork_cmd.add_argument("--child-id", help="the child's session id (default: generated)")
    fork_cmd.add_argument(
        "--title",
        help="the new branch's title (default: '<source title> (branch N)'); a retry keeps "
        "the first",
    )
    fork_cmd.set_defaults(func=cmd_fork)

    child = session_sub.add_parser("child", help="start a linked child session (no history)")
    child.add_argument("session_id")
    child.add_argument("--title", required=True)
    child.add_argument("--turn", help="the parent's turn the child is spawned from")
    child.add_argument("--tool-call", help="the parent's tool call the child is spawned from")
    child.add_argument("--child-id", help="the child's session id (default: generated)")
    child.set_defaults(func=cmd_child)

    lineage_cmd = session_sub.add_parser("lineage", help="ancestors of a session up to its root")
    lineage_cmd.add_argument("session_id")
    lineage_cmd.set_defaults(func=cmd_lineage)

    tree_cmd = session_sub.add_parser("tree", help="forks and children below a session")
    tree_cmd.add_argument("session_id")
    tree_cmd.set_defaults(func=cmd_tree)

    map_cmd = session_sub.add_parser(
        "map", help="the branch map of a session's whole family, turn by turn"
    )
    map_cmd.add_argument("session_id")
    map_cmd.add_argument(
        "--format", choices=("json", "dot"), default="json", help="JSON (default) or Graphviz"
    )
    map_cmd.set_defaults(func=cmd_map)


def cmd_targets(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """The fork-targets answer for one session."""
    return session_targets(store, args.session_id)


def cmd_fork(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Fork; a missing boundary or generation is taken from the current targets.

    When the turn is not a listed target the defaults are left impossible
    (boundary 0) so the fork itself refuses with its precise reason. At the
    start (``--at-start``) the boundary is 0 and the turn ``None``.
    """
    source_id = validate_session_id(args.session_id)
    title = given_title(args.title) if args.title is not None else None
    boundary, generation = args.boundary, args.generation
    if args.at_start:
        boundary = 0 if boundary is None else boundary
        if generation is None:
            generation = fork_targets(store, source_id).generation
    elif boundary is None or generation is None:
        current = fork_targets(store, source_id)
        target = current.target(args.turn)
        if boundary is None:
            boundary = target.boundary_sequence if target and target.boundary_sequence else 0
        if generation is None:
            generation = current.generation
    name = new_branch_name_from_store(store, source_id, args.turn)
    request = ForkRequest(source_id, args.turn, boundary, generation, args.child_id)
    result = fork(
        store,
        request,
        args.operation_id or new_id("op"),
        title=name.title if title is None else title,
        label=name.label,
        fork_turn_index=name.fork_turn_index,
    )
    return result.to_json()


def cmd_child(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Create a child session linked from both sides."""
    spawned: dict[str, Any] = {"turnId": args.turn}
    if args.tool_call:
        spawned["toolCallId"] = args.tool_call
    parent_id = validate_session_id(args.session_id)
    result = create_child(store, parent_id, spawned, args.title, child_id=args.child_id)
    return result.to_json()


def cmd_lineage(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """A session's ancestors, nearest first."""
    return session_lineage(store, args.session_id)


def cmd_tree(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """The descendant tree of a session, flat and depth-first (see :func:`session_tree`)."""
    return session_tree(store, args.session_id)


def cmd_map(store: SessionStore, args: argparse.Namespace) -> dict[str, Any] | int:
    """The branch map of the family ``session_id`` belongs to (JSON, or Graphviz text)."""
    found = family_map(store, args.session_id)
    if args.format == "dot":
        sys.stdout.write(found.to_dot())
        sys.stdout.flush()
        return 0
    return found.to_json()
