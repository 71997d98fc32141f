"""``branchwise serve``: expose the store over HTTP (DESIGN §5)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import Any

from branchwise.core.cli.output import print_json
from branchwise.core.errors import InvalidArgument
from branchwise.core.store.store import SessionStore


def register_top(sub: argparse._SubParsersAction) -> None:
    """Add the top-level ``serve`` command."""
    serve = sub.add_parser("serve", help="serve fork targets and forks over HTTP")
    serve.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="port (0 picks a free one)")
    serve.set_defaults(func=cmd_serve)


def cmd_serve(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Serve until interrupted; the first output line says where and where the token is."""
    from branchwise.core.remote.server import TOKEN_FILE, serve

    if not 0 <= args.port <= 65535:
        raise InvalidArgument(
            "argument --port must be between 0 and 65535", argument="--port", value=str(args.port)
        )

    def ready(url: str) -> None:
        print_json({"url": url, "tokenFile": str(store.root / TOKEN_FILE)})

    store.sweep_temporary()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(store, args.host, args.port, ready))
    return {"stopped": True}
