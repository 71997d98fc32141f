"""The ``branchwise`` console script: headless commands, or the desktop app.

Qt is imported only when the window is actually opened, so headless commands
start fast and run on machines without a display. Before it is, a display is
looked for (:mod:`~branchwise.core.cli.display`: none is said plainly, not
left to Qt's abort) and the system libraries Qt needs are checked
(:mod:`~branchwise.desktop.system_libraries`): a missing one is named with
the command that installs it, and the exit status is 1, instead of an ``ImportError`` or Qt's abort.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from branchwise.core.cli.display import display_problem
from branchwise.core.cli.main import parse_command_line, refuse_argument, run_command
from branchwise.core.errors import BranchwiseError, InvalidArgument, QtLibrariesMissing


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``branchwise``: a subcommand prints JSON; no subcommand opens the app."""
    try:
        args = parse_command_line(argv)
    except InvalidArgument as exc:
        return refuse_argument(exc)
    if args.command is not None:
        return run_command(args)
    no_display = display_problem(os.environ)
    if no_display is not None:
        return _cannot_start(args, no_display)
    from branchwise.desktop.system_libraries import check_display_libraries

    try:
        check_display_libraries(os.environ)
    except QtLibrariesMissing as exc:
        return _cannot_start(args, exc)
    from branchwise.desktop.app import run_app

    return run_app(args)


def _cannot_start(args: argparse.Namespace, exc: BranchwiseError) -> int:
    """Say why the window cannot open, in the person's language, on stderr; exit 1."""
    from branchwise.core.i18n.language import set_language
    from branchwise.core.i18n.locales import choose_language, system_locale
    from branchwise.core.i18n.reasons import error_text

    set_language(choose_language(args.lang, None, system_locale())[0])
    sys.stderr.write(error_text(exc) + "\n")
    sys.stderr.flush()
    return 1


if __name__ == "__main__":
    sys.exit(main())
