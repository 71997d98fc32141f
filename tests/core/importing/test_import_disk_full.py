"""An import that runs out of space: typed ``disk_full``, only whole conversations, none half-built.

The import builds a batch of conversations in unpublished folders and
publishes them together; a full disk at any step of that (a folder, a file,
a write, a link, a rename) must leave the published conversations whole, no
unpublished folder behind, and a later import (the space came back) must
finish the rest, each conversation once.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.chatgpt_export import conversation, linear, message, write_export
from helpers.faults import DiskFullAt

from branchwise.core.errors import DiskFull
from branchwise.core.importing.run import import_path
from branchwise.core.store.store import TEMP_PREFIX, SessionStore

MAX_STEPS = 400


def _with_forks() -> dict[str, object]:
    rows: list[tuple[str, str | None, dict[str, object] | None]] = [("r", None, None)]
    parent = "r"
    for k in range(3):
        user, answer = f"u{k}", f"a{k}"
        rows.append((user, parent, message("user", f"question {k}", time=10 * k)))
        rows.append((answer, user, message("assistant", f"answer {k}", time=10 * k + 1)))
        rows.append((f"{answer}r", user, message("assistant", f"again {k}", time=10 * k + 2)))
        parent = answer
    return conversation("full-1", "Full", rows, current=parent)


def _sessions(store: SessionStore) -> dict[str, list[tuple[str, str]]]:
    found = {}
    for name in os.listdir(store.sessions_dir):
        assert not name.startswith(TEMP_PREFIX), "an unpublished folder was left behind"
        snapshot = store.read(name)
        found[name] = [(m.role, m.content) for m in snapshot.projection.messages]
    return found


def test_a_full_disk_at_any_step_leaves_whole_conversations_and_reimport_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    export = write_export(tmp_path / "conversations.json", [_with_forks(), linear("lin", 2)])
    reference = SessionStore(tmp_path / "reference")
    import_path(reference, export)
    expected = _sessions(reference)
    assert len(expected) == 5  # a root with three forks, and a linear one
    failures = 0
    for at in range(1, MAX_STEPS):
        store = SessionStore(tmp_path / f"at-{at}")
        faults = DiskFullAt(at)
        with faults.armed_in(monkeypatch):
            try:
                import_path(store, export)
            except DiskFull as exc:
                assert exc.code == "disk_full"
                failures += 1
        if not faults.fired:
            break
        survivors = _sessions(store)
        assert all(survivors[sid] == expected[sid] for sid in survivors)
        again = import_path(store, export)  # the space came back
        assert sum(c.created for c in again.conversations) == len(expected) - len(survivors)
        assert _sessions(store) == expected
    else:
        raise AssertionError("the import never ran out of steps to fail")
    assert failures >= 20
