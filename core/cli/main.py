"""The ``branchwise`` argument parser and the headless command dispatcher.

Commands live in small modules that each add their subcommands through a
``register`` function; every handler takes the store and the parsed
arguments and returns a JSON-ready dict. Typed errors become
``{"error": {...}}`` and a non-zero exit.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from branchwise.core.cli import forking, models, serve, sessions
from branchwise.core.cli.output import print_json
from branchwise.core.errors import BranchwiseError
from branchwise.core.store.store import SessionStore, default_data_root


def build_parser() -> argparse.ArgumentParser:
    """The whole command line, headless commands and the app's own options."""
    parser = argparse.ArgumentParser(
        prog="branchwise",
        description="Branchwise: branch any finished turn into a new conversation.",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="data root (default: $BRANCHWISE_HOME or the platform's user data folder)",
    )
    parser.add_argument("--lang", help="interface language: en, zh_Hans or zh_Hant")
    top = parser.add_subparsers(dest="command", metavar="COMMAND")
    session = top.add_parser("session", help="work with sessions headlessly (JSON output)")
    session_sub = session.add_subparsers(
        dest="session_command", metavar="SUBCOMMAND", required=True
    )
    sessions.register(session_sub)
    forking.register(session_sub)
    models.register_top(top)
    serve.register_top(top)
    return parser


def data_root(args: argparse.Namespace) -> Path:
    """The data root chosen by ``--data-dir``, else the default."""
    return Path(args.data_dir) if args.data_dir else default_data_root()


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed headless command; print its JSON; return the exit status."""
    try:
        store = SessionStore(data_root(args))
        result = args.func(store, args)
    except BranchwiseError as exc:
        print_json(exc.to_json())
        return 1
    exit_code = int(result.pop("_exit", 0)) if isinstance(result, dict) else 0
    print_json(result)
    return exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Parse and run a headless command (the app entry handles no-command)."""
    args = build_parser().parse_args(argv)
    if args.command is None:
        build_parser().print_help(sys.stderr)
        return 2
    return run_command(args)
