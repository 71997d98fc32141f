"""``branchwise session verify`` and ``show`` with a damaged projection snapshot: a cache note."""

from __future__ import annotations

from pathlib import Path

from helpers.cli import run_cli
from helpers.sessions import complete_turn

from branchwise.core.projection.snapshot_cache import SNAPSHOT_FILE, wait_for_snapshots
from branchwise.core.store.store import SessionStore


def test_verify_names_a_damaged_snapshot_as_a_cache_note_not_damage(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, snapshot_bytes=0)
    with store.create("cached") as writer:
        for n in range(4):
            complete_turn(writer, f"t{n}", f"question {n}", tokens=2)
        session_id = writer.session_id
    with store.open_writer(session_id):
        pass  # writes the snapshot
    wait_for_snapshots()
    snapshot = store.session_dir(session_id) / "log" / SNAPSHOT_FILE
    _, before = run_cli(tmp_path, "session", "show", session_id)
    data = bytearray(snapshot.read_bytes())
    data[len(data) // 2] ^= 0xFF
    snapshot.write_bytes(bytes(data))

    code, report = run_cli(tmp_path, "session", "verify", session_id)
    assert code == 0 and report["ok"] and report["corruption"] is None
    assert [(f["code"], f["file"], f["cache"]) for f in report["findings"]] == [
        ("snapshot_unused", f"log/{SNAPSHOT_FILE}", True)
    ]
    _, after = run_cli(tmp_path, "session", "show", session_id)
    assert after == before
