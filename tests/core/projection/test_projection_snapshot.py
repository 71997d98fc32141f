"""The projection snapshot is a cache: used when it matches, ignored and rebuilt otherwise.

Every test compares what a reader gets through the snapshot with a full
replay of the same log (``store.read`` with every frame decodes everything).
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import orjson
import pytest
from helpers.forking import fork_at
from helpers.sessions import complete_turn

from branchwise.core.log.segments import log_pieces
from branchwise.core.log.sidecars import SIDECAR_SUFFIXES
from branchwise.core.projection import events as ev
from branchwise.core.projection.projection import Projection
from branchwise.core.projection.snapshot_cache import SNAPSHOT_FILE, wait_for_snapshots
from branchwise.core.store.publish import replace_log
from branchwise.core.store.store import SessionStore, verify_session


def _store(tmp_path: Path, roll_bytes: int = 16 * 1024 * 1024) -> SessionStore:
    return SessionStore(tmp_path, roll_bytes=roll_bytes, snapshot_bytes=0)


def _session(store: SessionStore, turns: int, prefix: str = "t") -> str:
    with store.create("snap") as writer:
        writer.commit([ev.session_config("m", "be brief", 0.5)])
        for n in range(turns):
            complete_turn(writer, f"{prefix}{n}", f"question {n} " * (1 + n % 4), tokens=n + 1)
        return writer.session_id


def _open_and_close(store: SessionStore, session_id: str) -> Projection:
    """A writer open (which writes the snapshot), its projection, the snapshot written."""
    with store.open_writer(session_id) as writer:
        projection = writer.projection
    wait_for_snapshots()
    return projection


def _snapshot(store: SessionStore, session_id: str) -> Path:
    return store.session_dir(session_id) / "log" / SNAPSHOT_FILE


def _both(store: SessionStore, session_id: str) -> tuple[Projection, Projection, bool]:
    """(projection via the snapshot, via a full replay, whether the snapshot was used)."""
    quick = store.read(session_id, every_frame=False)
    full = store.read(session_id)
    return quick.projection, full.projection, quick.scan.resumed is not None


def test_an_open_writes_a_snapshot_that_the_next_read_resumes_after(tmp_path: Path) -> None:
    store = _store(tmp_path)
    session = _session(store, 12)
    live = _open_and_close(store, session)
    assert _snapshot(store, session).is_file()
    quick, full, used = _both(store, session)
    assert used and quick == full == live
    assert quick.turns[-1].turn_id == "t11" and quick.input_tokens == sum(range(1, 13))
    assert verify_session(store, session)["findings"] == []


def test_a_writer_resuming_inside_its_active_segment_keeps_sidecars_exact(tmp_path: Path) -> None:
    store = _store(tmp_path)
    session = _session(store, 5)
    _open_and_close(store, session)
    with store.open_writer(session) as writer:  # resumes after the snapshot
        complete_turn(writer, "later", "more", tokens=3)
        live = writer.projection
    wait_for_snapshots()
    log_dir = store.session_dir(session) / "log"
    sidecars = {p.name: p.read_bytes() for p in log_dir.iterdir() if p.suffix in SIDECAR_SUFFIXES}
    quick, full, used = _both(store, session)
    assert used and quick == full == live
    # A writer open without the snapshot rebuilds the sidecars from a full replay: same bytes.
    _snapshot(store, session).unlink()
    with store.open_writer(session):
        pass
    wait_for_snapshots()
    assert {p.name: p.read_bytes() for p in log_dir.iterdir() if p.suffix in SIDECAR_SUFFIXES} == (
        sidecars
    )


def test_rolls_and_an_open_turn_are_restored(tmp_path: Path) -> None:
    store = _store(tmp_path, roll_bytes=600)
    session = _session(store, 9)
    _open_and_close(store, session)
    with store.open_writer(session) as writer:
        writer.commit([ev.turn_start("open"), ev.user_message("u-open", "still asking")])
        writer.commit([ev.assistant_message("a-open", "half an ans", "demo", partial=True)])
    quick, full, used = _both(store, session)
    assert used and quick == full
    assert len(log_pieces(store.session_dir(session), store.manifest(session))) > 3
    assert quick.open_turn is not None and quick.open_turn.turn_id == "open"


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x40
    path.write_bytes(bytes(data))


def _section_offsets(path: Path) -> list[int]:
    """Where each section's payload starts (after the 8-byte start and its 8-byte head)."""
    data, at, starts = path.read_bytes(), 8, []
    while at < len(data):
        length, _ = struct.unpack_from("<II", data, at)
        starts.append(at + 8)
        at += 8 + length
    return starts


def _another_format(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:6] + struct.pack("<H", 9) + data[8:])


DAMAGE = {
    "deleted": lambda p: p.unlink(),
    "empty": lambda p: p.write_bytes(b""),
    "truncated": lambda p: os.truncate(p, p.stat().st_size // 2),
    "key flipped": lambda p: _flip(p, _section_offsets(p)[0] + 3),
    "tracker flipped": lambda p: _flip(p, _section_offsets(p)[1] + 5),
    "projection flipped": lambda p: _flip(p, _section_offsets(p)[2] + 7),
    "text flipped": lambda p: _flip(p, _section_offsets(p)[3] + 1),
    "another format": lambda p: _another_format(p),
    "not a snapshot": lambda p: p.write_bytes(b"hello, this is not a snapshot" * 50),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_snapshot_is_ignored_noted_and_rebuilt(tmp_path: Path, damage: str) -> None:
    store = _store(tmp_path)
    session = _session(store, 6)
    _open_and_close(store, session)
    DAMAGE[damage](_snapshot(store, session))
    quick, full, used = _both(store, session)
    assert not used and quick == full
    report = verify_session(store, session)
    assert report["ok"] and report["corruption"] is None
    notes = [f for f in report["findings"] if f["code"] == "snapshot_unused"]
    assert (notes == []) if damage == "deleted" else (len(notes) == 1 and notes[0]["cache"])
    assert report["findings"] == notes
    reopened = _open_and_close(store, session)  # rebuilt by the next writer open
    quick, full, used = _both(store, session)
    assert used and quick == full == reopened
    assert verify_session(store, session)["findings"] == []


def test_another_schema_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build whose projection has other fields writes a snapshot this one does not restore."""
    store = _store(tmp_path)
    session = _session(store, 3)
    from branchwise.core.projection import snapshot as state

    monkeypatch.setattr(state, "STATE_VERSION", state.STATE_VERSION + 1)
    _open_and_close(store, session)
    monkeypatch.undo()
    quick, full, used = _both(store, session)
    assert not used and quick == full
    assert [f["code"] for f in verify_session(store, session)["findings"]] == ["snapshot_unused"]


def test_a_rewind_leaves_no_stale_snapshot_in_use(tmp_path: Path) -> None:
    store = _store(tmp_path)
    session = _session(store, 6)
    _open_and_close(store, session)
    commits = [frame.events for frame in store.read(session).scan.frames]
    keep = [
        [{k: v for k, v in e.items() if k not in ("seq", "ts")} for e in commit]
        for commit in commits[:4]
    ]
    replace_log(store, session, keep)
    quick, full, used = _both(store, session)
    assert quick == full and [t.turn_id for t in full.turns] == ["t0"]
    assert not used


def test_damage_in_covered_history_is_named_as_without_a_snapshot(tmp_path: Path) -> None:
    store = _store(tmp_path)
    session = _session(store, 6)
    _open_and_close(store, session)
    segment = log_pieces(store.session_dir(session), store.manifest(session))[0].path
    _flip(segment, 200)
    quick = store.read(session, every_frame=False)
    full = store.read(session)
    assert quick.scan.resumed is None
    assert quick.projection == full.projection
    assert full.scan.corruption is not None
    assert quick.scan.corruption is not None
    assert quick.scan.corruption.details == full.scan.corruption.details
    assert not verify_session(store, session)["ok"]


def test_a_fork_links_the_snapshot_and_its_child_counts_only_its_own_usage(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path, roll_bytes=700)
    session = _session(store, 8)
    _open_and_close(store, session)
    with store.open_writer(session) as writer:
        complete_turn(writer, "t8", "after the snapshot", tokens=50)
    child = fork_at(store, session, "t8", op="op-snap").child_session_id
    linked = _snapshot(store, child)
    assert linked.is_file() and linked.stat().st_ino == _snapshot(store, session).stat().st_ino
    quick, full, used = _both(store, child)
    assert used and quick == full
    assert (quick.input_tokens, quick.output_tokens) == (0, 0)
    with store.open_writer(child) as writer:
        complete_turn(writer, "c1", "child's own", tokens=4)
    quick, full, used = _both(store, child)
    assert used and quick == full and (quick.input_tokens, quick.output_tokens) == (4, 8)
    # The parent's snapshot is untouched by anything the child did.
    parent_quick, parent_full, parent_used = _both(store, session)
    assert parent_used and parent_quick == parent_full


def test_a_killed_writers_temporary_snapshot_is_swept(tmp_path: Path) -> None:
    store = _store(tmp_path)
    session = _session(store, 3)
    log_dir = store.session_dir(session) / "log"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    leftover = log_dir / f".{SNAPSHOT_FILE}.tmp-{int(dead.stdout)}-1"
    leftover.write_bytes(b"half a snapshot")
    mine = log_dir / f".{SNAPSHOT_FILE}.tmp-{os.getpid()}-1"  # a live writer's: kept
    mine.write_bytes(b"being written")
    _open_and_close(store, session)
    assert not leftover.exists() and mine.exists()
    assert _both(store, session)[2]


def test_a_streaming_answers_deltas_are_restored(tmp_path: Path) -> None:
    """Partial answers stored as deltas (item 4): the snapshot holds the text so far."""
    store = _store(tmp_path)
    session = _session(store, 2)
    with store.open_writer(session) as writer:
        writer.commit([ev.turn_start("s"), ev.user_message("u-s", "stream please")])
        writer.commit([ev.assistant_delta("Hel", ("a-s", "demo"))])
        writer.commit([ev.assistant_delta("lo, wor")])
    _open_and_close(store, session)  # closes the turn as interrupted, keeps the text
    with store.open_writer(session, continue_turn=None) as writer:
        writer.commit([ev.turn_start("s2"), ev.user_message("u-s2", "again")])
        writer.commit([ev.assistant_delta("part", ("a-s2", "demo"))])
    quick, full, used = _both(store, session)
    assert used and quick == full
    answer = quick.message("a-s")
    assert answer is not None and answer.content == "Hello, wor"
    assert quick.message("a-s2") is not None


def _rewrite_section(path: Path, index: int, change: object) -> None:
    """Re-encode one JSON section with ``change(value)`` applied and valid checksums."""
    data, at, sections = path.read_bytes(), 8, []
    while at < len(data):
        length, _ = struct.unpack_from("<II", data, at)
        sections.append(data[at + 8 : at + 8 + length])
        at += 8 + length
    value = orjson.loads(sections[index])
    change(value)  # type: ignore[operator]
    sections[index] = orjson.dumps(value)
    out = data[:8] + b"".join(struct.pack("<II", len(p), zlib.crc32(p)) + p for p in sections)
    path.write_bytes(out)


def test_a_state_a_buggy_writer_left_is_replayed_not_trusted(tmp_path: Path) -> None:
    """Checksums hold, schema matches, but the state does not restore: a full replay."""
    store = _store(tmp_path)
    session = _session(store, 4)
    _open_and_close(store, session)

    def too_long(rest: dict) -> None:
        rest["messages"][0][2] = 10**9  # a text length beyond the text

    _rewrite_section(_snapshot(store, session), 2, too_long)
    quick, full, used = _both(store, session)
    assert not used and quick == full
    with store.open_writer(session) as writer:
        assert writer.projection == full


def test_damage_after_the_snapshot_is_named_as_without_it(tmp_path: Path) -> None:
    store = _store(tmp_path)
    session = _session(store, 4)
    _open_and_close(store, session)
    covered = store.read(session, every_frame=False).scan.resumed
    assert covered is not None
    store.snapshot_bytes = None  # this open writes no newer snapshot
    with store.open_writer(session) as writer:
        for n in range(3):
            complete_turn(writer, f"late{n}", "after the snapshot")
    segment = log_pieces(store.session_dir(session), store.manifest(session))[-1].path
    _flip(segment, covered.end + 40)  # inside the first frame after the snapshot
    quick = store.read(session, every_frame=False)
    full = store.read(session)
    assert quick.scan.resumed == covered
    assert quick.scan.corruption is not None and full.scan.corruption is not None
    assert quick.scan.corruption.message == full.scan.corruption.message
    assert quick.scan.corruption.details == full.scan.corruption.details
    assert quick.projection == full.projection


def test_a_closing_writer_leaves_a_snapshot_the_first_cold_read_resumes_after(
    tmp_path: Path,
) -> None:
    """A session written turn by turn by one writer had no open that replayed enough to
    leave a snapshot: its close leaves one, so the first cold read decodes no frame."""
    store = SessionStore(tmp_path, roll_bytes=256 * 1024)
    with store.create("big") as writer:
        for n in range(20):  # 20 turns of 30 KB: more than a close's 512 KiB threshold
            complete_turn(writer, f"t{n}", f"question {n} " * 2500)
        session_id = writer.session_id
    wait_for_snapshots()
    assert _snapshot(store, session_id).exists()
    quick, full, used = _both(store, session_id)
    assert used and quick == full
    assert store.read(session_id, every_frame=False).scan.frames == []  # nothing replayed
    # A writer resumes after it too, sidecars exact, and its own close covers its turns.
    with store.open_writer(session_id) as writer:
        complete_turn(writer, "later", "more " * 2000)
    wait_for_snapshots()
    quick, full, used = _both(store, session_id)
    assert used and quick == full and quick.turns[-1].turn_id == "later"
    assert verify_session(store, session_id)["ok"]


def test_a_close_below_the_threshold_leaves_no_snapshot(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, snapshot_bytes=0)  # every open snapshots; a small close not
    session_id = _session(store, 5)
    wait_for_snapshots()
    assert not _snapshot(store, session_id).exists()
