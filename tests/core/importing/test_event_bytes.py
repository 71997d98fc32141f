"""Importing writes the very bytes it always wrote: the events' constructors changed nothing.

The importer builds its events with the projection's constructors
(:mod:`branchwise.core.projection.events`). A log's bytes are its format, so
these digests of every log file an import of the real export fixtures writes
were taken before the constructors were used, and must never move: a changed
key order or a dropped field would make an imported session differ from one
imported by an earlier build.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from branchwise.core.importing.run import import_path
from branchwise.core.store.store import SessionStore

FIXTURES = Path(__file__).parents[2] / "fixtures" / "importing"

LOG_DIGESTS = {
    "open_webui/chat-export.json": (
        "37424b7ffa5550768b300435e470c9c0dcd82a585148cc77760796a40bb41615"
    ),
    "librechat/menu-flat.json": "115a2fffaf600ac76d8071544322dd784c7d5420dab2ad5bd41473ca89cd4f5b",
    # moved on purpose: its branch of a branch is "(branch 1.1)", no longer two suffixes
    "librechat/kyoto-tree.json": "64d99027b7234c713f792574253d37265d4bb62e6ce12a6f355336944a3df963",
    "claude_code": "0b84c5597bb08e07a61f1f23f8591764e8b4f3eed87022c73a3ff03807425caf",
}


def _log_digest(root: Path) -> str:
    """Every log file of every session (segments, seeds, sidecars), by name and bytes."""
    digest = hashlib.sha256()
    for path in sorted((root / "sessions").glob("*/log/*")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@pytest.mark.parametrize("export", sorted(LOG_DIGESTS))
def test_an_import_writes_the_same_log_bytes(tmp_path: Path, export: str) -> None:
    report = import_path(SessionStore(tmp_path), FIXTURES / export)
    assert report.conversations  # the fixture imported something
    assert _log_digest(tmp_path) == LOG_DIGESTS[export]
