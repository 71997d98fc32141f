"""``branchwise serve``: expose the store over HTTP (docs/cli.md, "Serve")."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import sys
from typing import Any

from branchwise.core.cli.models import turn_setup
from branchwise.core.cli.output import print_json
from branchwise.core.conversation.settings import ConversationSettings
from branchwise.core.errors import InvalidArgument
from branchwise.core.providers.base import Provider
from branchwise.core.store.store import SessionStore


def register_top(sub: argparse._SubParsersAction) -> None:
    """Add the top-level ``serve`` command."""
    serve = sub.add_parser("serve", help="serve sessions, turns and forks over HTTP")
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface (default 127.0.0.1; anything else is reachable from the network and "
        "is plain HTTP: put it behind a TLS reverse proxy or an SSH tunnel)",
    )
    serve.add_argument("--port", type=int, default=8765, help="port (0 picks a free one)")
    serve.add_argument(
        "--delay-ms", type=int, default=0, help="demo responder delay per chunk (for trials)"
    )
    serve.set_defaults(func=cmd_serve)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cmd_serve(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Serve until interrupted; the first output line says where and where the token is.

    Turns sent to the server run with the data root's own provider settings,
    read when each turn starts.
    """
    from branchwise.core.remote.server.app import TOKEN_FILE, serve

    if not 0 <= args.port <= 65535:
        raise InvalidArgument(
            "argument --port must be between 0 and 65535", argument="--port", value=str(args.port)
        )
    if not is_loopback(args.host):
        sys.stderr.write(
            f"warning: serving on {args.host}, reachable from other machines over plain HTTP; "
            "anyone who can read the traffic can read the token. Put the server behind a TLS "
            "reverse proxy or reach it through an SSH tunnel.\n"
        )
        sys.stderr.flush()

    def ready(url: str) -> None:
        print_json({"url": url, "tokenFile": str(store.root / TOKEN_FILE)})

    def setup(conversation: ConversationSettings) -> tuple[Provider, str]:
        return turn_setup(store, args, conversation)

    store.sweep_temporary()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(store, args.host, args.port, ready, setup))
    return {"stopped": True}
