"""``branchwise session new|config|list|show|rename|say|verify|migrate``."""

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
from branchwise.core.conversation.names import rename
from branchwise.core.conversation.settings import (
    ConversationSettings,
    validate_conversation_settings,
)
from branchwise.core.conversation.views import session_list, session_show
from branchwise.core.errors import BranchwiseError, InvalidArgument
from branchwise.core.ids import validate_session_id
from branchwise.core.runtime import TurnListener, TurnRunner
from branchwise.core.store.store import SessionStore, verify_session


def register(sub: argparse._SubParsersAction) -> None:
    """Add the session subcommands of this module."""
    new = sub.add_parser("new", help="create a session")
    new.add_argument("--title", default="", help="title (default: from the first message)")
    _add_conversation_options(new)
    new.set_defaults(func=cmd_new)

    config = sub.add_parser(
        "config", help="show or change a conversation's model, system prompt and temperature"
    )
    config.add_argument("session_id")
    _add_conversation_options(config)
    config.set_defaults(func=cmd_config)

    sub.add_parser("list", help="list sessions, newest first").set_defaults(func=cmd_list)

    show = sub.add_parser("show", help="manifest, turns and messages of a session")
    show.add_argument("session_id")
    show.set_defaults(func=cmd_show)

    rename = sub.add_parser("rename", help="give a conversation a new title or branch label")
    rename.add_argument("session_id")
    rename.add_argument("--title", help="its new title (one line, 1-200 characters)")
    rename.add_argument("--label", help="its new branch label (one line, 1-80 characters)")
    rename.set_defaults(func=cmd_rename)

    say = sub.add_parser("say", help="run one turn and commit it")
    say.add_argument("session_id")
    say.add_argument("text")
    say.add_argument("--delay-ms", type=int, default=0, help="demo responder delay per chunk")
    say.add_argument("--quiet", action="store_true", help="print only the JSON result")
    add_attach_option(say)
    add_provider_options(say)
    say.set_defaults(func=cmd_say)

    verify = sub.add_parser("verify", help="check a session's log without changing it")
    verify.add_argument("session_id")
    verify.set_defaults(func=cmd_verify)

    migrate = sub.add_parser(
        "migrate", help="upgrade sessions to the segmented log (format 2); idempotent"
    )
    which = migrate.add_mutually_exclusive_group(required=True)
    which.add_argument("session_id", nargs="?", help="the session to upgrade")
    which.add_argument("--all", action="store_true", help="every session in the data folder")
    migrate.set_defaults(func=cmd_migrate)


def _add_conversation_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None, help='this conversation\'s model ("" clears)')
    parser.add_argument(
        "--system", default=None, metavar="TEXT", help='its system prompt ("" clears)'
    )
    parser.add_argument(
        "--temperature",
        default=None,
        metavar="T",
        help='its temperature, 0 to 2 ("default" clears)',
    )
    parser.add_argument(
        "--model-server",
        default=None,
        metavar="URL",
        help='who answers it: an OpenAI-compatible server\'s address, or "demo" ("" clears)',
    )


def _conversation_settings(
    args: argparse.Namespace, current: ConversationSettings
) -> ConversationSettings:
    """``current`` with the options given on the command line (validated)."""
    model = current.model if args.model is None else args.model
    system = current.system if args.system is None else args.system
    temperature: object = current.temperature
    if args.temperature is not None:
        text = args.temperature.strip()
        if text in ("", "default"):
            temperature = None
        else:
            try:
                temperature = float(text)
            except ValueError:
                temperature = text  # refused below with the field named
    server = current.model_server if args.model_server is None else args.model_server
    return validate_conversation_settings(model, system, temperature, server)


def cmd_new(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Create a root session (with its own model, system prompt or temperature if given)."""
    chosen = _conversation_settings(args, ConversationSettings())
    with store.create(args.title) as writer:
        if not chosen.empty:
            writer.set_conversation_settings(
                chosen.model, chosen.system, chosen.temperature, chosen.model_server
            )
        result = {"sessionId": writer.session_id, "title": writer.manifest.title}
    return result


def cmd_config(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """``{"sessionId", "config"}``: a conversation's own settings, changed by any options given.

    Nothing is written when nothing changes; a change is one ``session/config``
    commit under the writer lease (``lease_held`` while another process writes).
    """
    session_id = validate_session_id(args.session_id)
    if all(
        getattr(args, name) is None for name in ("model", "system", "temperature", "model_server")
    ):
        current = store.read(session_id).projection.settings
        return {"sessionId": session_id, "config": current.to_json()}
    with store.open_writer(session_id) as writer:
        chosen = _conversation_settings(args, writer.projection.settings)
        if chosen != writer.projection.settings:
            writer.set_conversation_settings(
                chosen.model, chosen.system, chosen.temperature, chosen.model_server
            )
    return {"sessionId": session_id, "config": chosen.to_json()}


def cmd_list(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Every readable session's manifest, newest first; unusable folders under ``damaged``."""
    return session_list(store)


def cmd_show(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Manifest, turns, messages and usage of a session (read without a lease)."""
    return session_show(store, args.session_id)


def cmd_rename(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """``{"sessionId", "title", "label", "labelParts", "forkTurnIndex"}`` after the rename."""
    if args.title is None and args.label is None:
        raise InvalidArgument("rename needs --title or --label", argument="--title")
    return rename(store, args.session_id, title=args.title, label=args.label)


class StdoutStreamer(TurnListener):
    """Prints the answer to stdout as it arrives."""

    def text_received(self, turn_id: str, message_id: str, chunk: str) -> None:
        sys.stdout.write(chunk)
        sys.stdout.flush()

    def turn_ended(self, result: object) -> None:
        sys.stdout.write("\n")
        sys.stdout.flush()


def cmd_say(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Run one whole turn and commit it; the JSON result is the last line."""
    listener = None if args.quiet else StdoutStreamer()
    settings_from_args(store, args)  # unusable settings refuse before the session is touched
    session_id = validate_session_id(args.session_id)
    if not store.exists(session_id):
        store.read(session_id)  # the typed "no such session" before any file is stored
    files = attached(store, args)  # durable before the question's commit refers to them
    with store.open_writer(session_id) as writer:
        provider, system = turn_setup(store, args, writer.projection.settings)
        limits = attachment_limits(store, args)
        runner = TurnRunner(writer, provider, listener, system=system, limits=limits)
        result = asyncio.run(runner.run(args.text, files))
    payload = result.to_json()
    if result.error is not None:
        payload["_exit"] = 1
    return payload


def cmd_verify(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Integrity report of a session (findings included); changes nothing on disk."""
    report = verify_session(store, args.session_id)
    return {**report, **({} if report["ok"] else {"_exit": 1})}


def cmd_migrate(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Upgrade one session (``ID``) or every session (``--all``) to format 2.

    Prints ``{"migrated": [ids], "alreadyCurrent": [ids], "failed": [errors]}``:
    sessions upgraded now, sessions already in format 2, and (``--all`` only)
    each session that could not be upgraded, as its typed error with its
    ``sessionId`` (a writer holds it, its log is corrupt…); the exit status is
    1 when any failed. With one ``ID``, a failure is the usual error object.
    """
    migrated: list[str] = []
    current: list[str] = []
    failed: list[dict[str, Any]] = []
    if args.all:
        ids = []
        for item in store.iter_manifests():
            if isinstance(item, BranchwiseError):
                failed.append(item.to_json()["error"])
            else:
                ids.append(item.session_id)
    else:
        ids = [validate_session_id(args.session_id)]
    for session_id in sorted(ids):
        try:
            done = store.migrate(session_id)
        except BranchwiseError as exc:
            if not args.all:
                raise
            failed.append({**exc.to_json()["error"], "sessionId": session_id})
            continue
        (migrated if done else current).append(session_id)
    result: dict[str, Any] = {"migrated": migrated, "alreadyCurrent": current, "failed": failed}
    return {**result, **({"_exit": 1} if failed else {})}
