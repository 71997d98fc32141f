"""Reading format 2: own segments, seeds bounded at a frame end, continuity, damage by file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.segmented import as_format_1, seeded_child, split_log
from helpers.sessions import complete_turn, session_with_turns

from branchwise.core.errors import CorruptLog
from branchwise.core.log.segments import (
    log_identity,
    read_log_from,
    read_session_log,
    scan_session_log,
)
from branchwise.core.store.manifest import load_manifest, save_manifest
from branchwise.core.store.store import SessionStore, verify_session

CHILD = "childaaa"


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "root")


def _summary(store: SessionStore, session_id: str) -> tuple[object, ...]:
    snap = store.read(session_id)
    p = snap.projection
    return (
        [(m.message_id, m.content) for m in p.messages],
        [t.to_json() for t in p.turns],
        p.input_tokens,
        p.output_tokens,
        snap.scan.last_seq,
    )


def test_segments_read_exactly_as_the_single_file(store: SessionStore) -> None:
    sid = session_with_turns(store, 6)
    before = _summary(store, sid)
    size = as_format_1(store, sid).stat().st_size
    assert _summary(store, sid) == before
    paths = split_log(store, sid, [4, 9])
    assert len(paths) == 3
    assert _summary(store, sid) == before
    assert log_identity(store.session_dir(sid), store.manifest(sid))[2] == size
    report = verify_session(store, sid)
    assert report["ok"] and report["findings"] == []
    assert [f["file"] for f in report["files"]] == [f"log/{p.name}" for p in paths]
    assert sum(f["commits"] for f in report["files"]) == report["commits"] == 13


def test_a_writer_appends_to_the_last_segment(store: SessionStore) -> None:
    sid = session_with_turns(store, 2)
    paths = split_log(store, sid, [3])
    with store.open_writer(sid) as writer:
        complete_turn(writer, "more")
    assert paths[0].stat().st_size < paths[1].stat().st_size
    assert store.read(sid).projection.turns[-1].turn_id == "more"


def test_a_seeded_child_inherits_verbatim_and_counts_only_its_own_usage(
    store: SessionStore,
) -> None:
    parent = session_with_turns(store, 4)
    (segment,) = split_log(store, parent, [])
    seeded_child(store, parent, segment, through_commit=5, child_id=CHILD)  # two whole turns
    snap = store.read(CHILD)
    assert [t.turn_id for t in snap.projection.turns] == ["t0", "t1"]
    assert snap.projection.input_tokens == 0  # the parent paid for the inherited turns
    assert snap.scan.frames[-1].commit == 6
    with store.open_writer(CHILD) as writer:
        complete_turn(writer, "own", tokens=7)
    assert store.read(CHILD).projection.input_tokens == 7
    # The parent is unchanged: the child's appends went to its own segment.
    assert [t.turn_id for t in store.read(parent).projection.turns] == ["t0", "t1", "t2", "t3"]
    files = verify_session(store, CHILD)["files"]
    assert [(f["kind"], f["links"]) for f in files] == [("seed", 2), ("segment", 1)]


def test_a_seed_not_ending_on_its_checksum_is_corruption_naming_it(store: SessionStore) -> None:
    parent = session_with_turns(store, 3)
    (segment,) = split_log(store, parent, [])
    seeded_child(store, parent, segment, through_commit=5, child_id=CHILD)
    directory = store.session_dir(CHILD)
    manifest = load_manifest(directory)
    seed = manifest.seed[0]
    save_manifest(
        directory, manifest.with_changes(seed=(seed.__class__(**{**_fields(seed), "last_crc": 1}),))
    )
    corruption = store.read(CHILD).scan.corruption
    assert corruption is not None
    assert corruption.details["file"] == "log/seed-000.seg"
    assert corruption.details["offset"] == seed.end
    with pytest.raises(CorruptLog):
        store.open_writer(CHILD)
    report = verify_session(store, CHILD)
    assert not report["ok"] and report["findings"][0]["file"] == "log/seed-000.seg"


def _fields(seed: object) -> dict[str, object]:
    names = ("file", "first_commit", "first_seq", "end", "end_commit", "last_crc")
    return {name: getattr(seed, name) for name in names}


def test_a_short_seed_is_corruption(store: SessionStore) -> None:
    parent = session_with_turns(store, 3)
    (segment,) = split_log(store, parent, [])
    seeded_child(store, parent, segment, through_commit=5, child_id=CHILD)
    seed_path = store.session_dir(CHILD) / "log" / "seed-000.seg"
    os.unlink(seed_path)
    seed_path.write_bytes(segment.read_bytes()[:100])
    corruption = scan_session_log(store.session_dir(CHILD), store.manifest(CHILD)).scan.corruption
    assert corruption is not None and corruption.details["file"] == "log/seed-000.seg"


def test_damage_in_an_earlier_segment_is_corruption_naming_file_offset_and_seq(
    store: SessionStore,
) -> None:
    sid = session_with_turns(store, 4)
    paths = split_log(store, sid, [5])
    data = bytearray(paths[0].read_bytes())
    data[-3] ^= 0xFF  # the last frame of the first segment: later segments follow
    paths[0].write_bytes(bytes(data))
    corruption = store.read(sid).scan.corruption
    assert corruption is not None
    assert corruption.details["file"] == f"log/{paths[0].name}"
    assert 0 < corruption.details["offset"] < len(data)
    assert corruption.details["afterSeq"] > 0


def test_a_missing_segment_breaks_continuity(store: SessionStore) -> None:
    sid = session_with_turns(store, 4)
    paths = split_log(store, sid, [3, 6])
    os.unlink(paths[1])
    corruption = store.read(sid).scan.corruption
    assert corruption is not None and corruption.details["file"] == f"log/{paths[2].name}"


def test_a_torn_tail_is_only_the_last_segments(store: SessionStore) -> None:
    sid = session_with_turns(store, 3)
    paths = split_log(store, sid, [4])
    with open(paths[-1], "ab") as handle:
        handle.write(b"\xffBW\x01\x10")
    report = verify_session(store, sid)
    assert report["ok"] and report["findings"][0]["file"] == f"log/{paths[-1].name}"
    assert report["tornTail"]["offset"] == paths[-1].stat().st_size - 5
    with open(paths[0], "ab") as handle:
        handle.write(b"\xffBW\x01\x10")  # torn bytes before a later segment: corruption
    assert store.read(sid).scan.corruption is not None


def test_reading_a_format_1_session_is_unchanged(store: SessionStore) -> None:
    sid = session_with_turns(store, 2)
    as_format_1(store, sid)
    log = read_session_log(store.session_dir(sid), store.manifest(sid))
    assert [p.name for p in log.pieces] == ["events.log"]
    assert log.data == (store.session_dir(sid) / "events.log").read_bytes()


def test_a_catch_up_reads_from_any_offset_without_reading_the_pieces_before_it(
    store: SessionStore,
) -> None:
    parent = session_with_turns(store, 4)
    (segment,) = split_log(store, parent, [])
    seeded_child(store, parent, segment, through_commit=5, child_id=CHILD)
    with store.open_writer(CHILD) as writer:
        complete_turn(writer, "own", tokens=7)
    directory, manifest = store.session_dir(CHILD), store.manifest(CHILD)
    whole = read_session_log(directory, manifest).data
    for start in [0, 1, 100, len(whole) // 2, len(whole) - 1, len(whole), len(whole) + 5]:
        assert read_log_from(directory, manifest, start) == whole[start:]
    # The seed ends before this offset: it is sized from its entry, never opened.
    seed_end = manifest.seed[0].end
    (seed_link,) = [p for p in (directory / manifest.log_dir).iterdir() if p.samefile(segment)]
    seed_link.unlink()
    assert read_log_from(directory, manifest, seed_end) == whole[seed_end:]
    with pytest.raises(CorruptLog):
        read_log_from(directory, manifest, seed_end - 1)
