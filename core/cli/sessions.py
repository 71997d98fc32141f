"""``branchwise session new|list|show|say|verify``."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from branchwise.core.cli.models import add_provider_options, provider_from_args
from branchwise.core.cli.search import index_written
from branchwise.core.ids import validate_session_id
from branchwise.core.runtime import TurnListener, TurnRunner
from branchwise.core.store.store import SessionStore, verify_session
from branchwise.core.views import session_list, session_show


def register(sub: argparse._SubParsersAction) -> None:
    """Add the session subcommands of this module."""
    new = sub.add_parser("new", help="create a session")
    new.add_argument("--title", default="", help="title (default: from the first message)")
    new.set_defaults(func=cmd_new)

    sub.add_parser("list", help="list sessions, newest first").set_defaults(func=cmd_list)

    show = sub.add_parser("show", help="manifest, turns and messages of a session")
    show.add_argument("session_id")
    show.set_defaults(func=cmd_show)

    say = sub.add_parser("say", help="run one turn and commit it")
    say.add_argument("session_id")
    say.add_argument("text")
    say.add_argument("--delay-ms", type=int, default=0, help="demo responder delay per chunk")
    say.add_argument("--quiet", action="store_true", help="print only the JSON result")
    add_provider_options(say)
    say.set_defaults(func=cmd_say)

    verify = sub.add_parser("verify", help="check a session's log without changing it")
    verify.add_argument("session_id")
    verify.set_defaults(func=cmd_verify)


def cmd_new(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Create a root session."""
    with store.create(args.title) as writer:
        result = {"sessionId": writer.session_id, "title": writer.manifest.title}
    index_written(store, writer.session_id)
    return result


def cmd_list(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Every readable session's manifest, newest first; unusable folders under ``damaged``."""
    return session_list(store)


def cmd_show(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Manifest, turns, messages and usage of a session (read without a lease)."""
    return session_show(store, args.session_id)


class _StdoutStreamer(TurnListener):
    """Prints the answer to stdout as it arrives."""

    def text_received(self, turn_id: str, message_id: str, chunk: str) -> None:
        sys.stdout.write(chunk)
        sys.stdout.flush()

    def turn_ended(self, result: object) -> None:
        sys.stdout.write("\n")
        sys.stdout.flush()


def cmd_say(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Run one whole turn and commit it; the JSON result is the last line."""
    provider = provider_from_args(store, args)
    listener = None if args.quiet else _StdoutStreamer()
    with store.open_writer(validate_session_id(args.session_id)) as writer:
        runner = TurnRunner(writer, provider, listener)
        result = asyncio.run(runner.run(args.text))
    index_written(store, writer.session_id)
    payload = result.to_json()
    if result.error is not None:
        payload["_exit"] = 1
    return payload


def cmd_verify(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Integrity report of a session (findings included); changes nothing on disk."""
    report = verify_session(store, args.session_id)
    return {**report, **({} if report["ok"] else {"_exit": 1})}
