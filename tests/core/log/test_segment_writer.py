"""Writing format 2: new sessions, sidecars, rolls by size and by links, torn tails, break-off."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.segmented import read_turn_rows
from helpers.sessions import complete_turn, cut_copies, log_file, session_with_turns

from branchwise.core.fork.targets import fork_targets
from branchwise.core.log.segments import ROLL_LINKS, log_pieces
from branchwise.core.log.sidecars import (
    CLOSES_TURN,
    HOLDS_CHECKPOINT,
    TurnEntry,
    find_record,
    read_blob_entries,
    read_index,
)
from branchwise.core.projection import events as ev
from branchwise.core.store.store import SessionStore, verify_session


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "root")


def read_turn_entries(segment: Path) -> list[TurnEntry]:
    """The ``.tix`` records of a segment as turn entries (none without a usable file)."""
    return [
        TurnEntry(row.turn_id, row.message_id, row.start_seq, row.number)
        for row in read_turn_rows(segment) or ()
    ]


def _segments(store: SessionStore, session_id: str) -> list[Path]:
    directory = store.session_dir(session_id)
    return [p.path for p in log_pieces(directory, store.manifest(session_id))]


def test_a_new_session_is_segmented_with_its_sidecars(store: SessionStore) -> None:
    session_id = session_with_turns(store, 3)
    directory = store.session_dir(session_id)
    assert store.manifest(session_id).format == 2
    assert not (directory / "events.log").exists()
    (segment,) = _segments(store, session_id)
    assert segment.name == "000000000001-000000000001.seg"
    records = read_index(segment)
    turns = read_turn_entries(segment)
    boundaries = [t.boundary_sequence for t in store.read(session_id).projection.turns]
    assert records is not None and [r.last_seq for r in records] == boundaries
    assert [t.turn_id for t in turns] == ["t0", "t1", "t2"]
    assert all(r.flags == CLOSES_TURN for r in records)
    data = segment.read_bytes()
    for record in records:  # each record points at its frame
        assert record.end <= len(data) and data[record.offset : record.offset + 3] == b"\xffBW"
    found = find_record(segment, boundaries[1])
    assert found is not None and found[0] == records[1] and found[1] == 1
    assert find_record(segment, boundaries[1] - 1) is None


def test_checkpoints_are_listed_in_the_blobs_sidecar(store: SessionStore) -> None:
    with store.create("cp") as writer:
        writer.commit([ev.turn_start("t"), ev.user_message("u", "q")])
        writer.commit(
            [
                ev.assistant_message("a", "x", "demo"),
                {"type": "checkpoint", "checkpointId": "c1", "blobs": ["ab" * 32]},
                ev.turn_end("t", "completed"),
            ]
        )
        session_id = writer.session_id
    (segment,) = _segments(store, session_id)
    assert read_blob_entries(segment, 99) == ["ab" * 32]
    assert read_blob_entries(segment, 2) == []
    (record,) = read_index(segment) or []
    assert record.flags & HOLDS_CHECKPOINT


def test_the_writer_rolls_at_the_size_limit(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root", roll_bytes=2000)
    # 20 turns are over 6,000 bytes whatever the ids and times weigh: at least four segments.
    session_id = session_with_turns(store, 20)
    segments = _segments(store, session_id)
    assert len(segments) > 3
    assert all(s.stat().st_size < 2000 + 1000 for s in segments)
    snap = store.read(session_id)
    assert [t.turn_id for t in snap.projection.turns] == [f"t{n}" for n in range(20)]
    indexed = [t.turn_id for s in segments for t in read_turn_entries(s)]
    assert indexed == [f"t{n}" for n in range(20)]
    assert verify_session(store, session_id)["ok"]
    # A cold reader's targets equal the live ones after any number of rolls.
    with store.open_writer(session_id) as writer:
        live = [t.turn_id for t in writer.projection.turns]
    assert [t.turn_id for t in fork_targets(store, session_id).targets] == live


def test_the_writer_rolls_when_the_active_segment_has_512_links(
    store: SessionStore, tmp_path: Path
) -> None:
    session_id = session_with_turns(store, 1)
    (active,) = _segments(store, session_id)
    holders = tmp_path / "links"
    holders.mkdir()
    for n in range(ROLL_LINKS - 1):
        os.link(active, holders / str(n))
    with store.open_writer(session_id) as writer:
        complete_turn(writer, "after")
    segments = _segments(store, session_id)
    assert len(segments) == 2 and segments[0] == active
    assert active.stat().st_nlink == ROLL_LINKS  # the old segment was never written again
    assert [t.turn_id for t in store.read(session_id).projection.turns] == ["t0", "after"]


def test_a_torn_tail_of_an_unshared_segment_is_cut_in_place(store: SessionStore) -> None:
    session_id = session_with_turns(store, 2)
    log = log_file(store.session_dir(session_id))
    inode = log.stat().st_ino
    with log.open("ab") as handle:
        handle.write(b"\xffBW\x01torn")
    with store.open_writer(session_id) as writer:
        assert writer.cut_tail is not None
    assert log.stat().st_ino == inode
    (copy,) = cut_copies(store.session_dir(session_id))
    assert copy.read_bytes() == b"\xffBW\x01torn"


def test_a_torn_tail_of_a_shared_segment_is_broken_off(store: SessionStore, tmp_path: Path) -> None:
    session_id = session_with_turns(store, 2)
    log = log_file(store.session_dir(session_id))
    with log.open("ab") as handle:
        handle.write(b"\xffBW\x01torn")
    holder = tmp_path / "another-session-holds-this"
    os.link(log, holder)
    shared = holder.read_bytes()
    with store.open_writer(session_id) as writer:
        assert writer.cut_tail is not None
        complete_turn(writer, "more")
    assert holder.read_bytes() == shared  # the other link's bytes never changed
    assert log.stat().st_ino != holder.stat().st_ino
    assert holder.stat().st_nlink == 1 and log.stat().st_nlink == 1
    assert [t.turn_id for t in store.read(session_id).projection.turns] == ["t0", "t1", "more"]
    (copy,) = cut_copies(store.session_dir(session_id))
    assert copy.read_bytes() == b"\xffBW\x01torn"


@pytest.mark.parametrize("damage", ["missing", "short", "flipped", "stale"])
def test_damaged_sidecars_of_the_active_segment_are_rebuilt_on_open(
    store: SessionStore, damage: str
) -> None:
    session_id = session_with_turns(store, 4)
    (segment,) = _segments(store, session_id)
    index = segment.with_suffix(".idx")
    good = index.read_bytes()
    if damage == "missing":
        index.unlink()
    elif damage == "short":
        index.write_bytes(good[:-10])
    elif damage == "flipped":
        index.write_bytes(good[:30] + bytes([good[30] ^ 1]) + good[31:])
    else:
        index.write_bytes(good[: 16 + 44])  # one record of four
    answer = fork_targets(store, session_id)
    with store.open_writer(session_id):
        pass
    assert index.read_bytes() == good
    assert fork_targets(store, session_id) == answer


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names fds through /proc")
def test_a_rebuilt_index_lands_only_after_its_segment_is_fsynced(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork takes an ``.idx`` record as proof its frame is durable; a rebuild keeps that true.

    The frames a writer open indexes may be ones a crashed writer wrote but
    never synced, so the segment is fsynced before the rebuilt index replaces
    the old one. Sidecars that are already right cost no fsync at all.
    """
    session_id = session_with_turns(store, 3)
    (segment,) = _segments(store, session_id)
    index = segment.with_suffix(".idx")
    steps: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        steps.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path, **kwargs: int | None) -> None:
        steps.append(("replace", str(dst)))
        real_replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    with store.open_writer(session_id):
        pass
    assert ("replace", str(index)) not in steps
    assert ("fsync", str(segment)) not in steps  # nothing to rebuild, nothing synced

    index.unlink()
    steps.clear()
    with store.open_writer(session_id):
        pass
    assert steps.index(("fsync", str(segment))) < steps.index(("replace", str(index)))
