"""An import killed at any moment leaves whole conversations; importing again gives each once.

The import publishes in batches (build without fsync, one file-system sync,
the renames, one folder fsync), so besides random kills the moments between
those steps are hit on purpose: after the sync before any rename, and after
some of a batch's renames.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.chatgpt_export import conversation, linear, message, write_export
from helpers.kills import kill_moments, start_worker, time_worker

from branchwise.core.importing.run import import_path
from branchwise.core.store.store import TEMP_PREFIX, SessionStore

KILLS = 60

_IMPORTER = """
import sys
from pathlib import Path
from branchwise.core.importing.run import import_path
from branchwise.core.store.store import SessionStore
store = SessionStore(Path(sys.argv[1]))
print("ready", flush=True)
import_path(store, sys.argv[2])
print("done", flush=True)
"""

_BATCH_KILLER = """
import os
import signal
import sys
from pathlib import Path
from branchwise.core.importing.formats import importer_for
from branchwise.core.importing.plan import plan_tree
from branchwise.core.importing.publish import BuiltConversation, TreePublisher
from branchwise.core.importing.source import SourceTree
from branchwise.core.fs.atomic import sync_filesystem
from branchwise.core.store.publish import publish_batch
from branchwise.core.store.store import SessionStore
store, export, renamed = SessionStore(Path(sys.argv[1])), Path(sys.argv[2]), int(sys.argv[3])
built = []
for record in importer_for(export, None).read(export):
    if isinstance(record, SourceTree):
        for item in TreePublisher(store, plan_tree(record)).build():
            if isinstance(item, BuiltConversation):
                built.append((item.folder, item.conversation.session_id))
if renamed:  # the batch's sync, its first renames (and their folder fsync)
    publish_batch(store, built[:renamed])
else:
    sync_filesystem(store.sessions_dir)
print(" ".join(session_id for _, session_id in built), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _branchy(n: int) -> dict[str, object]:
    rows: list[tuple[str, str | None, dict[str, object] | None]] = [(f"{n}-r", None, None)]
    parent = f"{n}-r"
    for k in range(6):
        user, answer = f"{n}-u{k}", f"{n}-a{k}"
        rows.append((user, parent, message("user", f"question {k} " * 30, time=10 * k)))
        rows.append((answer, user, message("assistant", f"answer {k} " * 80, time=10 * k + 1)))
        rows.append((f"{answer}r", user, message("assistant", f"again {k}", time=10 * k + 2)))
        rows.append((f"{user}e", parent, message("user", f"edited {k}", time=10 * k + 3)))
        rows.append(
            (f"{answer}e", f"{user}e", message("assistant", "edited answer", time=10 * k + 4))
        )
        parent = answer
    return conversation(f"crash-{n}", f"Crash {n}", rows, current=parent)


def _export(tmp_path: Path) -> Path:
    return write_export(
        tmp_path / "conversations.json",
        [_branchy(0), linear("lin-1", 4), _branchy(1), linear("lin-2", 2), _branchy(2)],
    )


def _temporary(store: SessionStore) -> list[str]:
    return [n for n in os.listdir(store.sessions_dir) if n.startswith(TEMP_PREFIX)]


def _transcripts(store: SessionStore) -> dict[str, list[tuple[str, str]]]:
    found = {}
    for name in os.listdir(store.sessions_dir):
        if name.startswith(TEMP_PREFIX) or name.startswith("."):
            continue
        snapshot = store.read(name)
        assert snapshot.scan.torn_tail is None and snapshot.scan.corruption is None
        found[name] = [(m.role, m.content) for m in snapshot.projection.messages]
    return found


@pytest.mark.slow
def test_sigkilled_imports_leave_whole_conversations_and_reimport_gives_each_once(
    tmp_path: Path,
) -> None:
    export = _export(tmp_path)
    reference_store = SessionStore(tmp_path / "reference")
    reference = import_path(reference_store, export)
    importing = [sys.executable, "-c", _IMPORTER, str(tmp_path / "timed"), str(export)]
    took = time_worker(importing, until="done")
    expected = _transcripts(reference_store)
    assert len(expected) == len(reference.conversations) > 30
    rng = random.Random(16)
    mid_import = 0
    for round_number, moment in enumerate(kill_moments(rng, took, KILLS, spread=1.5)):
        store = SessionStore(tmp_path / f"round-{round_number}")
        proc = start_worker([sys.executable, "-c", _IMPORTER, str(store.root), str(export)])
        time.sleep(moment)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        if store.sessions_dir.exists():
            # whatever was published is whole and is exactly the reference's conversation
            survivors = _transcripts(store)
            assert all(survivors[sid] == expected[sid] for sid in survivors)
            # a batch built but not (all) renamed, or some batches published
            mid_import += bool(_temporary(store)) or 0 < len(survivors) < len(expected)
        again = import_path(store, export)
        assert [c.session_id for c in again.conversations] == [
            c.session_id for c in reference.conversations
        ]
        assert _transcripts(store) == expected  # each conversation exactly once
        store.sweep_temporary()
        assert not _temporary(store)
    print(f"{KILLS} kills over {took * 1000:.0f} ms of import, {mid_import} mid-import")
    assert mid_import >= KILLS // 10  # the kills did land mid-import


@pytest.mark.slow
@pytest.mark.parametrize("renamed", [0, 1, 14, 40])
def test_a_kill_between_the_batch_sync_and_its_renames_publishes_only_the_renamed(
    tmp_path: Path, renamed: int
) -> None:
    export = _export(tmp_path)
    reference_store = SessionStore(tmp_path / "reference")
    reference = import_path(reference_store, export)
    expected = _transcripts(reference_store)
    store = SessionStore(tmp_path / "killed")
    proc = subprocess.run(
        [sys.executable, "-c", _BATCH_KILLER, str(store.root), str(export), str(renamed)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    built = proc.stdout.split()
    assert built == [c.session_id for c in reference.conversations]
    assert renamed < len(built)
    # the renamed ones are published whole, the rest are only unpublished folders
    assert _transcripts(store) == {sid: expected[sid] for sid in built[:renamed]}
    assert len(_temporary(store)) == len(built) - renamed
    again = import_path(store, export)
    assert [c.created for c in again.conversations] == [i >= renamed for i in range(len(built))]
    assert _transcripts(store) == expected  # each conversation exactly once
    assert len(store.sweep_temporary()) == len(built) - renamed
    assert not _temporary(store)
