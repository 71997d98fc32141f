"""The ``branchwise`` argument parser and the headless command dispatcher.

Commands live in small modules that each add their subcommands through a
``register`` function; every handler takes the store and the parsed
arguments and returns a JSON-ready dict. Typed errors become
``{"error": {...}}`` and exit 1; a command line that cannot be used as given
(argparse's usage errors, and :class:`~branchwise.core.errors.InvalidArgument`)
exits 2.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from branchwise.core.cli import (
    actions,
    attachments,
    compare,
    doctor,
    export,
    fanout,
    forking,
    importing,
    merge,
    models,
    remote,
    search,
    serve,
    sessions,
    trash,
)
from branchwise.core.cli.output import print_json, printable
from branchwise.core.cli.version import branchwise_version
from branchwise.core.errors import BranchwiseError, InvalidArgument
from branchwise.core.fork.engine import MAX_SEQUENCE
from branchwise.core.i18n.language import current_language, set_language
from branchwise.core.i18n.locales import choose_language, system_locale
from branchwise.core.store.store import SessionStore, default_data_root

USAGE_ERROR = 2
"""The exit status of a command line that cannot be used as given (as argparse's)."""


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
    remote.add_server_options(parser)
    parser.add_argument("--version", action="version", version=f"%(prog)s {branchwise_version()}")
    top = parser.add_subparsers(dest="command", metavar="COMMAND")
    session = top.add_parser("session", help="work with sessions headlessly (JSON output)")
    session_sub = session.add_subparsers(
        dest="session_command", metavar="SUBCOMMAND", required=True
    )
    sessions.register(session_sub)
    forking.register(session_sub)
    actions.register(session_sub)
    attachments.register(session_sub)
    trash.register(session_sub)
    export.register(session_sub)
    compare.register(session_sub)
    merge.register(session_sub)
    fanout.register(session_sub)
    models.register_top(top)
    serve.register_top(top)
    doctor.register_top(top)
    search.register_top(top)
    importing.register_top(top)
    return parser


def parse_command_line(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse ``argv`` (default: ``sys.argv``), refusing what no command can use.

    Runs before any command, so a refused argument leaves nothing written.

    Raises:
        InvalidArgument: an argument that is not UTF-8 text (on Linux a byte
            that is not UTF-8 arrives as a lone surrogate, which no JSON, log or
            manifest accepts), or a number outside ``0..2**63-1``.
    """
    tokens = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    for index, token in enumerate(tokens):
        if not _is_text(token):
            name = _argument_name(parser, tokens, index)
            raise InvalidArgument(
                f"argument {name} is not valid UTF-8 text",
                argument=name,
                value=printable(token),
            )
    args, leftover = parser.parse_known_args(tokens)
    if leftover and not search.query_from_leftover(args, leftover):
        args = parser.parse_args(tokens)  # the parser's own refusal of what it does not know
    for dest, value in vars(args).items():
        number = isinstance(value, int) and not isinstance(value, bool)
        if number and not 0 <= value <= MAX_SEQUENCE:
            name = "--" + dest.replace("_", "-")
            raise InvalidArgument(
                f"argument {name} must be between 0 and {MAX_SEQUENCE}",
                argument=name,
                value=str(value),
            )
    return args


def _is_text(token: str) -> bool:
    try:
        token.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _argument_name(parser: argparse.ArgumentParser, tokens: list[str], index: int) -> str:
    """Which argument ``tokens[index]`` is: its option, or its positional's name.

    The parser is asked by parsing again with a placeholder in its place;
    when even that fails, the preceding option or the position names it.
    """
    token = tokens[index]
    previous = tokens[index - 1] if index else ""
    if token.startswith("-"):
        option = token.partition("=")[0]
        return option if _is_text(option) else f"#{index + 1}"
    placeholder = "\x00placeholder\x00"
    trial = [*tokens[:index], placeholder, *tokens[index + 1 :]]
    with contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit):
        for dest, value in vars(parser.parse_args(trial)).items():
            if value is not None and str(value) == placeholder:
                if previous.startswith("-") and previous.lstrip("-").replace("-", "_") == dest:
                    return previous
                return dest
    return previous if previous.startswith("-") else f"#{index + 1}"


def data_root(args: argparse.Namespace) -> Path:
    """The data root chosen by ``--data-dir``, else the default."""
    return Path(args.data_dir) if args.data_dir else default_data_root()


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed headless command; print its JSON; return the exit status.

    ``--lang`` is the language of what the command writes in words (a
    branch's name, an export's headings, progress lines) for this command
    only: a caller running commands in-process keeps its own.
    """
    previous = current_language()
    if getattr(args, "lang", None):
        set_language(choose_language(args.lang, None, system_locale())[0])
    try:
        return _run(args)
    finally:
        set_language(previous)


def _run(args: argparse.Namespace) -> int:
    # A command returns the JSON to print, or an exit status once it printed its own report.
    result: dict[str, Any] | int
    try:
        if getattr(args, "server", None) is not None:  # the command runs on that server
            result = remote.run_remote(args)
        elif getattr(args, "opens_store", True):
            result = args.func(SessionStore(data_root(args)), args)
        else:  # a command that must see the data root as it is (``doctor``)
            result = args.func(data_root(args), args)
    except BranchwiseError as exc:
        print_json(exc.to_json())
        return USAGE_ERROR if isinstance(exc, InvalidArgument) else 1
    if isinstance(result, int):  # the command printed its own report
        return result
    exit_code = int(result.pop("_exit", 0))
    print_json(result)
    return exit_code


def refuse_argument(exc: InvalidArgument) -> int:
    """Print a refused command line as a typed error; the usage-error exit status."""
    print_json(exc.to_json())
    return USAGE_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Parse and run a headless command (the app entry handles no-command)."""
    try:
        args = parse_command_line(argv)
    except InvalidArgument as exc:
        return refuse_argument(exc)
    if args.command is None:
        build_parser().print_help(sys.stderr)
        return 2
    return run_command(args)
