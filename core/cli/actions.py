"""``branchwise session edit|regenerate|retry``: ask a turn's question again.

``edit`` and ``regenerate`` branch (:mod:`~branchwise.core.conversation.ask_again`): the
fork publishes the branch with its prompt, then this process answers it,
streaming like ``session say``. ``retry`` runs the failed turn's prompt again
as a new turn of the same session. Each prints exactly
``{"childSessionId", "turnId", "messageId", "boundarySequence", "endReason"}``
(``childSessionId`` is ``null`` for a retry: it makes no branch). A turn that
ends in error still prints that line, with the typed error on stderr, and
exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from branchwise.core.cli.attachments import add_attach_option, attached
from branchwise.core.cli.models import (
    add_provider_options,
    attachment_limits,
    settings_from_args,
    turn_setup,
)
from branchwise.core.cli.output import print_json
from branchwise.core.cli.sessions import StdoutStreamer
from branchwise.core.conversation.ask_again import (
    asked_json,
    branch_turn,
    edit_request,
    failed_turn,
    question_of,
    regenerate_request,
)
from branchwise.core.conversation.names import new_branch_name_from_store
from branchwise.core.errors import BranchwiseError
from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.ids import new_id, validate_session_id
from branchwise.core.runtime import TurnResult, TurnRunner
from branchwise.core.store.store import SessionStore, SessionWriter


def register(session_sub: argparse._SubParsersAction) -> None:
    """Add ``edit``, ``regenerate`` and ``retry`` under ``session``."""
    edit = session_sub.add_parser(
        "edit", help="ask an edited prompt of a turn again, as a new branch"
    )
    edit.add_argument("session_id")
    edit.add_argument("--turn", required=True, help="the turn whose prompt is edited")
    edit.add_argument("text", help="the edited prompt")
    add_attach_option(edit)
    _common(edit)
    edit.set_defaults(func=cmd_edit)

    regenerate = session_sub.add_parser(
        "regenerate", help="ask a turn's prompt again for another answer, as a new branch"
    )
    regenerate.add_argument("session_id")
    regenerate.add_argument("--turn", required=True, help="the turn to answer again")
    _common(regenerate)
    regenerate.set_defaults(func=cmd_regenerate)

    retry = session_sub.add_parser(
        "retry", help="run the last failed turn's prompt again, in the same session"
    )
    retry.add_argument("session_id")
    retry.add_argument("--turn", help="the failed turn (default: the last one that failed)")
    retry.add_argument("--delay-ms", type=int, default=0, help="demo responder delay per chunk")
    retry.add_argument("--quiet", action="store_true", help="print only the JSON result")
    add_provider_options(retry)
    retry.set_defaults(func=cmd_retry)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--operation-id",
        help="idempotency key: reuse it after a failure to finish the same branch",
    )
    parser.add_argument("--delay-ms", type=int, default=0, help="demo responder delay per chunk")
    parser.add_argument("--quiet", action="store_true", help="print only the JSON result")
    add_provider_options(parser)


def cmd_edit(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Branch at the end of the turn before ``--turn`` and ask the edited prompt there."""
    settings_from_args(store, args)  # unusable settings refuse before anything is written
    session_id = validate_session_id(args.session_id)
    edit_request(store, session_id, args.turn, args.text)  # refusals before files are stored
    request = edit_request(store, session_id, args.turn, args.text, attached(store, args))
    return _branch_and_answer(store, args, request)


def cmd_regenerate(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Branch at the end of the turn before ``--turn`` and ask its prompt again."""
    settings_from_args(store, args)
    request = regenerate_request(store, validate_session_id(args.session_id), args.turn)
    return _branch_and_answer(store, args, request)


def cmd_retry(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Run the failed turn's prompt as a new turn of the same session."""
    settings_from_args(store, args)
    with store.open_writer(validate_session_id(args.session_id)) as writer:
        projection = writer.projection
        turn = failed_turn(projection, writer.session_id, args.turn)
        prompt = question_of(projection, turn)
        question = projection.message(turn.user_message_id or "")
        files = question.attachments if question is not None else ()  # asked again, not copied
        result = asyncio.run(_runner(store, args, writer).run(prompt, files))
    return _printed(None, result)


def _branch_and_answer(
    store: SessionStore, args: argparse.Namespace, request: ForkRequest
) -> dict[str, Any]:
    """Fork with the prompt in the branch, then answer its open turn in this process.

    A retry of the same ``--operation-id`` finds the branch the first call
    made: a turn still open (its process died) is answered now; one that
    ended is reported as it ended.
    """
    name = new_branch_name_from_store(
        store, request.source_session_id, request.turn_id, request.origin
    )
    forked = fork(
        store,
        request,
        args.operation_id or new_id("op"),
        title=name.title,
        label=name.label,
        fork_turn_index=name.fork_turn_index,
    )
    child = forked.child_session_id
    snapshot = store.read(child)
    turn = branch_turn(snapshot.projection, snapshot.manifest.seed_length)
    if turn is None:  # the fork publishes the prompt with the branch: never seen
        raise BranchwiseError(f"branch {child} has no turn of its own", sessionId=child)
    if not turn.is_open:
        return asked_json(
            child, turn.turn_id, turn.message_id, turn.boundary_sequence, turn.end_reason
        )
    with store.open_writer(child, continue_turn=turn.turn_id) as writer:
        result = asyncio.run(_runner(store, args, writer).answer())
    return _printed(child, result)


def _runner(store: SessionStore, args: argparse.Namespace, writer: SessionWriter) -> TurnRunner:
    provider, system = turn_setup(store, args, writer.projection.settings)
    listener = None if args.quiet else StdoutStreamer()
    limits = attachment_limits(store, args)
    return TurnRunner(writer, provider, listener, system=system, limits=limits)


def _printed(child: str | None, result: TurnResult) -> dict[str, Any]:
    """The result line; a turn that failed also prints its typed error on stderr, exit 1."""
    payload = asked_json(
        child, result.turn_id, result.message_id, result.boundary_sequence, result.end_reason
    )
    if result.error is not None:
        print_json(result.error.to_json(), sys.stderr)
        payload["_exit"] = 1
    return payload
