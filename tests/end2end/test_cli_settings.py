"""Commands that act on the settings refuse a newer-format ``settings.json`` instead of the demo."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.sessions import session_with_turns, tree_hashes

from branchwise.core.store.store import SessionStore

NEWER = b'{"format": 2, "provider": "openai", "baseUrl": "http://127.0.0.1:9/v1"}\n'


@pytest.mark.parametrize(
    "args",
    [
        ("session", "say", "{sid}", "hello", "--quiet"),
        ("session", "say", "{sid}", "hello", "--quiet", "--provider", "demo"),
        ("models",),
        ("models", "--detect", "--timeout", "0.1"),
    ],
)
def test_newer_settings_are_refused_left_in_place_and_nothing_runs(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    root = tmp_path / "root"
    sid = session_with_turns(SessionStore(root), 1)
    (root / "settings.json").write_bytes(NEWER)
    before = tree_hashes(root)
    code, body = run_cli(root, *(a.replace("{sid}", sid) for a in args), check=False)
    assert code == 1
    assert body["error"]["code"] == "unsupported_format"
    assert body["error"]["path"] == str(root / "settings.json")
    assert tree_hashes(root) == before  # no turn, nothing moved aside
