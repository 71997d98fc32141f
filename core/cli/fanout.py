"""``branchwise session fanout|fuse``: one question to several models, and their answers fused.

``fanout`` makes one branch per model or sample at the conversation's end
(:mod:`~branchwise.core.conversation.fanout`), answers them all at once in
this process (:mod:`~branchwise.core.fanout_run`), streams progress to
stderr as JSON lines and prints exactly ``{"operationId", "branches":
[{"sessionId", "label", "model", "turnId", "endReason"}]}``; it exits 1 when
a branch's answer ended in ``error`` (its typed error is on its ``ended``
progress line). ``fuse`` prints the merge
(:func:`~branchwise.core.fanout_run.fuse_answers`), ``{"parentSessionId",
"mergeSequence", "created"}``. Both run on a ``branchwise serve`` with
``--server`` (:mod:`~branchwise.core.cli.remote`).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from branchwise.core.cli.attachments import add_attach_option, attached
from branchwise.core.cli.models import add_provider_options, provider_for, settings_from_args
from branchwise.core.cli.output import print_json
from branchwise.core.conversation.fanout import FanoutBranch, fan_out, fanout_targets
from branchwise.core.conversation.settings import ConversationSettings
from branchwise.core.fanout_run import (
    PER_SERVER,
    BranchOutcome,
    BranchSetup,
    FanoutListener,
    answer_fanout,
    branches_line,
    ended_line,
    fanout_json,
    fuse_answers,
    require_models,
)
from branchwise.core.ids import new_id, validate_session_id
from branchwise.core.providers.demo import DEMO_MODEL, DemoProvider
from branchwise.core.settings import Settings
from branchwise.core.store.store import SessionStore


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``session fanout`` and ``session fuse``."""
    fanout = sub.add_parser(
        "fanout", help="ask several models (or one several times) at once, one branch each"
    )
    fanout.add_argument("session_id")
    fanout.add_argument("prompt")
    fanout.add_argument(
        "--samples", type=int, default=None, metavar="N", help="ask each model N times"
    )
    fanout.add_argument(
        "--operation-id", metavar="OP", help="retry-safe id: reuse it to finish the same branches"
    )
    fanout.add_argument(
        "--per-server",
        type=int,
        default=PER_SERVER,
        metavar="N",
        help=f"answers streamed from one server at once (default {PER_SERVER}; the rest queue)",
    )
    fanout.add_argument("--delay-ms", type=int, default=0, help="demo responder delay per chunk")
    fanout.add_argument("--quiet", action="store_true", help="print only the JSON result")
    add_attach_option(fanout)
    add_provider_options(fanout, many_models=True)
    fanout.set_defaults(func=cmd_fanout)

    fuse = sub.add_parser(
        "fuse", help="write one answer from several branches' answers and merge it back"
    )
    fuse.add_argument("session_id", help="the conversation the branches left")
    fuse.add_argument(
        "--from",
        dest="branches",
        action="append",
        required=True,
        metavar="BRANCH",
        help="a branch whose answer to combine (repeat)",
    )
    fuse.add_argument("--instruction", metavar="TEXT", help="what to ask the fusing model")
    fuse.add_argument("--operation-id", metavar="OP", help="retry-safe id of this fuse")
    fuse.add_argument("--delay-ms", type=int, default=0, help="demo responder delay per chunk")
    add_provider_options(fuse)
    fuse.set_defaults(func=cmd_fuse)


class ProgressLines(FanoutListener):
    """Each branch's progress as one JSON line on stderr."""

    def queued(self, branch: FanoutBranch) -> None:
        """The branch waits for its server."""
        print_json({"event": "queued", "sessionId": branch.session_id}, sys.stderr)

    def started(self, branch: FanoutBranch, turn_id: str) -> None:
        """The branch's model was asked."""
        print_json(
            {"event": "started", "sessionId": branch.session_id, "turnId": turn_id}, sys.stderr
        )

    def text(self, branch: FanoutBranch, chunk: str) -> None:
        """A piece of the answer."""
        print_json({"event": "text", "sessionId": branch.session_id, "chunk": chunk}, sys.stderr)

    def ended(self, outcome: BranchOutcome) -> None:
        """The branch's turn ended."""
        print_json(ended_line(outcome), sys.stderr)


def cmd_fanout(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Make the branches, then answer them all at once; the JSON result is the last line."""
    session_id = validate_session_id(args.session_id)
    conversation = store.read(session_id, every_frame=False).projection.settings
    settings = settings_from_args(store, args, conversation)
    # A server configured without a model has no default to sample: name one (invalid_fanout).
    default_model = settings.model if settings.configured else DEMO_MODEL
    targets = fanout_targets(args.models, args.samples, default_model)
    if settings.configured:  # the demo stands in for any model name
        asyncio.run(require_models(provider_for(settings, args), [t.model for t in targets]))
    operation_id = args.operation_id or new_id("op")
    files = attached(store, args)
    fanout = fan_out(
        store,
        session_id,
        args.prompt,
        targets,
        operation_id,
        settings=conversation,
        attachments=files,
    )
    listener = FanoutListener() if args.quiet else ProgressLines()
    if not args.quiet:
        print_json(branches_line(fanout), sys.stderr)

    def setup_for(branch: FanoutBranch, own: ConversationSettings) -> BranchSetup:
        asked = settings_from_args(store, args, own)
        provider = provider_for(asked, args)
        if isinstance(provider, DemoProvider):
            provider = provider.as_target(branch.target.model, branch.target.sample)
        return BranchSetup(provider, asked.system_prompt, _server(asked))

    outcomes = asyncio.run(
        answer_fanout(store, fanout, setup_for, listener, per_server=args.per_server)
    )
    result = fanout_json(fanout, outcomes)
    if any(o.end_reason == "error" for o in outcomes):
        result["_exit"] = 1
    return result


def _server(settings: Settings) -> str:
    return settings.base_url if settings.configured else "demo"


def cmd_fuse(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """``{"parentSessionId", "mergeSequence", "created"}``."""
    merged = asyncio.run(
        fuse_answers(
            store,
            validate_session_id(args.session_id),
            args.branches,
            args.operation_id or new_id("op"),
            instruction=args.instruction,
            provider_for=lambda own: provider_for(settings_from_args(store, args, own), args),
            model=args.model,
        )
    )
    return merged.to_json()
