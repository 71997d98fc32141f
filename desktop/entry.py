"""The ``branchwise`` console script: headless commands, or the desktop app.

Qt is imported only when the window is actually opened, so headless commands
start fast and run on machines without a display.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from branchwise.core.cli.main import parse_command_line, refuse_argument, run_command
from branchwise.core.errors import InvalidArgument


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``branchwise``: a subcommand prints JSON; no subcommand opens the app."""
    try:
        args = parse_command_line(argv)
    except InvalidArgument as exc:
        return refuse_argument(exc)
    if args.command is not None:
        return run_command(args)
    from branchwise.desktop.app import run_app

    return run_app(args)


if __name__ == "__main__":
    sys.exit(main())
