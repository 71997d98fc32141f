"""``branchwise import PATH [--format NAME]``: bring another app's conversations in.

Progress goes to stderr in the ``--lang`` language (a line at most every half
second, and a last one);
the last line on stdout is the report: ``{"conversations": [...], "skipped":
[...], "warnings": [...]}`` (:meth:`~branchwise.core.importing.run.ImportReport.to_json`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from branchwise.core.cli.output import printable
from branchwise.core.errors import InvalidArgument
from branchwise.core.i18n.language import format_number, ngettext
from branchwise.core.i18n.reasons import fill
from branchwise.core.importing.formats import IMPORTERS
from branchwise.core.importing.run import ImportProgress, import_path
from branchwise.core.store.store import SessionStore

_PROGRESS_EVERY = 0.5

EXPECTED_INPUT = {
    "chatgpt": "a ChatGPT conversations.json or the export's .zip",
    "claude-code": "a Claude Code .jsonl, a project folder or ~/.claude/projects",
    "open-webui": "an Open WebUI .json export",
    "librechat": "a LibreChat .json export",
}
"""What each ``--format`` reads, as a refusal names it."""
FOLDER_FORMATS = frozenset({"claude-code"})
"""The formats whose input may be a folder."""


def register_top(top: argparse._SubParsersAction) -> None:
    """Add ``import PATH [--format NAME]``."""
    command = top.add_parser(
        "import", help="import conversations from ChatGPT, Claude Code, Open WebUI or LibreChat"
    )
    command.add_argument("path", type=Path, help="an export file, a ChatGPT .zip, or a folder")
    command.add_argument(
        "--format", choices=sorted(IMPORTERS), help="the export's format (detected when omitted)"
    )
    command.set_defaults(func=cmd_import)


def _check_input(path: Path, format: str | None) -> None:
    """Refuse a folder given to a format that reads one file, saying what it expects.

    Raises:
        InvalidArgument: ``path`` is a folder and ``format`` reads files only.
    """
    if format is None or format in FOLDER_FORMATS or not path.is_dir():
        return
    inside = path / "conversations.json"
    hint = f"; use {inside}" if format == "chatgpt" and inside.is_file() else ""
    raise InvalidArgument(
        f"{path} is a folder; --format {format} reads {EXPECTED_INPUT.get(format, 'a file')}{hint}",
        argument="path",
        value=printable(str(path)),
    )


class _StderrProgress:
    """Prints progress to stderr, at most every half second."""

    def __init__(self) -> None:
        self._last = 0.0

    def __call__(self, progress: ImportProgress) -> None:
        now = time.monotonic()
        if not progress.total_bytes or now - self._last < _PROGRESS_EVERY:
            return
        self._last = now
        text = ngettext(
            "Importing: {n} conversation, {read} of {total} MB read",
            "Importing: {n} conversations, {read} of {total} MB read",
            progress.conversations,
        )
        params = {
            "n": format_number(progress.conversations),
            "read": format_number(round(progress.read_bytes / 1e6, 1)),
            "total": format_number(round(progress.total_bytes / 1e6, 1)),
        }
        print(fill(text, params), file=sys.stderr, flush=True)


def cmd_import(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """Import ``args.path``; the report is the command's JSON."""
    _check_input(args.path, args.format)
    progress = _StderrProgress()
    report = import_path(store, args.path, format=args.format, on_progress=progress)
    done = ngettext(
        "Imported: {created} new of {n} conversation, {skipped} skipped, {warnings} warnings",
        "Imported: {created} new of {n} conversations, {skipped} skipped, {warnings} warnings",
        len(report.conversations),
    )
    counts = {
        "created": report.created,
        "n": len(report.conversations),
        "skipped": len(report.skipped),
        "warnings": len(report.warnings),
    }
    params = {name: format_number(value) for name, value in counts.items()}
    print(fill(done, params), file=sys.stderr, flush=True)
    return report.to_json()
