"""Every ``--help`` of the command line points only at what ships: no design notes' sections.

The top level's help is read from a real ``branchwise --help`` process; every
command's and subcommand's from the same parser in this process (one process
each would take seconds for nothing more).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

from helpers import REPO_ROOT

from branchwise.core.cli.main import build_parser

UNSHIPPED_NOTE = re.compile(r"\b(?:DESIGN|ARCHITECTURE|STORAGE|STYLE)\.md\b|§\s?\d")
DOC_PATH = re.compile(r"\bdocs/[\w.-]+\.md\b")


def _helps(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple]:
    found = [(path, parser.format_help())]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _helps(sub, (*path, name))
    return found


def test_every_help_text_cites_only_shipped_documents() -> None:
    top = subprocess.run(
        [sys.executable, "-m", "branchwise.desktop.entry", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    helps = [((), top), *_helps(build_parser())[1:]]
    assert len(helps) > 20  # the walk found the subcommands
    for path, text in helps:
        assert not UNSHIPPED_NOTE.search(text), (path, text)
        for cited in DOC_PATH.findall(text):
            assert (REPO_ROOT / cited).is_file(), (path, cited)
