"""The ``branchwise`` argument parser and the headless command dispatcher.

Commands live in small modules that each add their subcommands through a
``register`` function; every handler takes the store and the parsed
arguments and returns a JSON-ready dict. Typed errors become
``{"error": {...}}`` and a non-zero exit.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from branchwise.core.cli.output import print_json
from branchwise.core.errors import BranchwiseError
from branchwise.core.store.store import SessionStore, default_data_root

# Modules adding `session …` subcommands (register) and top-level commands (register_top).
SESSION_COMMAND_MODULES = (
    "branchwise.core.cli.sessions",
    "branchwise.core.cli.forking",
)
TOP_COMMAND_MODULES = ("branchwise.core.cli.models", "branchwise.core.cli.serve")


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
    for name in SESSION_COMMAND_MODULES:
        module = _optional_module(name)
        if module is not None:
            module.register(session_sub)
    for name in TOP_COMMAND_MODULES:
        module = _optional_module(name)
        if module is not None:
            module.register_top(top)
    return parser


def _optional_module(name: str):  # type: ignore[no-untyped-def]
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return None


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
