"""A damaged last commit is corruption; only a torn write is cut, and never without a copy.

Issue 12, item 14 (etcd's line): a last frame the file ends inside (or whose
header is not whole, or which holds a zero-filled sector) is a torn write and
is cut when a writer opens, after its bytes are saved to
``events.log.cut-…``; a last frame written in full whose checksum fails is a
damaged durable commit: the session stays read-only and nothing is cut.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.segmented import scan_log
from helpers.sessions import complete_turn, cut_copies, log_file, session_with_turns, tear_log

from branchwise.core.errors import CorruptLog
from branchwise.core.log.frames import HEADER_SIZE
from branchwise.core.log.scan import SECTOR_SIZE, scan_bytes
from branchwise.core.store.store import SessionStore, verify_session


def _last_frame(log: Path) -> tuple[int, int]:
    frames = scan_log(log).frames
    return frames[-1].offset, frames[-1].end


def _cut_files(directory: Path) -> list[Path]:
    return cut_copies(directory)


def test_every_bit_flip_in_the_last_complete_commit_is_corruption_never_a_cut(
    store: SessionStore,
) -> None:
    session_id = session_with_turns(store, 2)
    directory = store.session_dir(session_id)
    log = log_file(directory)
    original = log.read_bytes()
    start, end = _last_frame(log)
    assert end == len(original)
    flips = 0
    for offset in range(start + HEADER_SIZE, end):
        for bit in range(8):
            damaged = bytearray(original)
            damaged[offset] ^= 1 << bit
            scan = scan_bytes(bytes(damaged))
            assert scan.torn_tail is None, (offset, bit)
            assert scan.corruption is not None and scan.corruption.details["offset"] == start
            flips += 1
    assert flips == (end - start - HEADER_SIZE) * 8

    # One of them for real: the writer refuses, the reader keeps the commits before it.
    damaged = bytearray(original)
    damaged[(start + HEADER_SIZE + end) // 2] ^= 0x04
    log.write_bytes(bytes(damaged))
    with pytest.raises(CorruptLog):
        store.open_writer(session_id)
    snapshot = store.read(session_id)
    assert [t.end_reason for t in snapshot.projection.turns][:1] == ["completed"]
    assert log.read_bytes() == bytes(damaged)  # nothing cut
    assert _cut_files(directory) == []
    report = verify_session(store, session_id)
    assert not report["ok"] and report["tornTail"] is None
    assert report["corruption"]["offset"] == start
    assert [f["code"] for f in report["findings"]] == ["corrupt_log"]


def test_every_bit_flip_in_the_last_commits_header_is_corruption(store: SessionStore) -> None:
    session_id = session_with_turns(store, 1)
    log = log_file(store.session_dir(session_id))
    original = log.read_bytes()
    start, _ = _last_frame(log)
    for offset in range(start, start + HEADER_SIZE):
        for bit in range(8):
            damaged = bytearray(original)
            damaged[offset] ^= 1 << bit
            scan = scan_bytes(bytes(damaged))
            assert scan.torn_tail is None and scan.corruption is not None, (offset, bit)


def test_a_truncated_last_commit_is_cut_and_its_bytes_kept(store: SessionStore) -> None:
    session_id = session_with_turns(store, 2)
    directory = store.session_dir(session_id)
    log = log_file(directory)
    original = log.read_bytes()
    index = log.with_suffix(".idx")
    original_index = index.read_bytes()
    start, end = _last_frame(log)
    cuts = 0
    for length in (1, HEADER_SIZE - 1, HEADER_SIZE, HEADER_SIZE + 1, end - start - 1):
        torn = original[: start + length]
        index.write_bytes(original_index)
        tear_log(log, torn)
        for copy in _cut_files(directory):
            copy.unlink()
        before = verify_session(store, session_id)
        assert before["ok"] and before["tornTail"] == {"offset": start, "length": length}
        assert [(f["code"], f["offset"], f["length"]) for f in before["findings"]] == [
            ("torn_tail", start, length)
        ]
        with store.open_writer(session_id) as writer:
            assert writer.cut_tail is not None and writer.cut_tail.offset == start
            assert writer.cut_copy is not None
            (copy,) = _cut_files(directory)
            assert writer.cut_copy == copy
            assert copy.read_bytes() == torn[start:]  # exactly the removed bytes
            assert copy.name.startswith(f"{log.name}.cut-") and copy.name.endswith(f"-at{start}")
            # The turn the cut commit would have closed is closed as interrupted.
            assert writer.projection.turns[-1].end_reason == "interrupted"
        after = verify_session(store, session_id)
        assert after["ok"] and after["tornTail"] is None
        assert [(f["code"], f["file"], f["offset"], f["length"]) for f in after["findings"]] == [
            ("log_tail_cut", str(copy.relative_to(directory)), start, length)
        ]
        cuts += 1
    assert cuts == 5


def test_several_cuts_keep_several_copies(store: SessionStore) -> None:
    with store.create("twice") as writer:
        session_id, directory = writer.session_id, writer.directory
    log = log_file(directory)
    removed = []
    for junk in (b"\xffBW\x01torn-one", b"\xffBW\x01torn-two"):
        with log.open("ab") as handle:
            handle.write(junk)
        with store.open_writer(session_id) as writer:
            complete_turn(writer, f"t{len(removed)}")
        removed.append(junk)
    copies = _cut_files(directory)
    assert sorted(c.read_bytes() for c in copies) == sorted(removed)
    findings = verify_session(store, session_id)["findings"]
    assert sorted(f["file"] for f in findings) == [str(c.relative_to(directory)) for c in copies]


def test_a_zero_filled_sector_in_the_last_commit_is_a_torn_write(store: SessionStore) -> None:
    # A crash after the file grew but before its data reached the disk leaves
    # zeros (what etcd's isTornEntry looks for): that commit was never durable.
    with store.create("long answer") as writer:
        complete_turn(writer, "t0", "x" * (3 * SECTOR_SIZE))
        session_id, directory = writer.session_id, writer.directory
    log = log_file(directory)
    original = bytearray(log.read_bytes())
    start, end = _last_frame(log)
    sector = (start // SECTOR_SIZE + 1) * SECTOR_SIZE
    original[sector : sector + SECTOR_SIZE] = bytes(SECTOR_SIZE)
    tear_log(log, bytes(original), durable=start)
    scan = scan_log(log)
    assert scan.corruption is None and scan.torn_tail is not None
    assert scan.torn_tail.offset == start
    with store.open_writer(session_id) as writer:
        assert writer.cut_copy is not None
        assert writer.cut_copy.read_bytes() == bytes(original[start:])
