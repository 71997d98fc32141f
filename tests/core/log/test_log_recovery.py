"""Torn tails, corruption and damaged bytes on real log files."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from helpers.segmented import scan_log
from helpers.sessions import log_file, tear_log
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from branchwise.core.errors import BranchwiseError, CorruptLog, InvalidFrame, UnsupportedFormat
from branchwise.core.log.frames import HEADER_SIZE, Incomplete, decode_frame, encode_frame
from branchwise.core.log.scan import LogScan, scan_bytes
from branchwise.core.log.writer import LogWriter
from branchwise.core.projection import events as ev
from branchwise.core.store.store import SessionStore


def _build(store: SessionStore, turns: int) -> tuple[str, Path]:
    with store.create("recovery") as writer:
        for n in range(turns):
            turn = f"turn-{n}"
            writer.commit([ev.turn_start(turn), ev.user_message(f"u{n}", f"question {n} ✓")])
            writer.commit(
                [
                    ev.assistant_message(f"a{n}", f"answer {n} 分支", "demo"),
                    ev.turn_end(turn, "completed"),
                ]
            )
        return writer.session_id, log_file(writer.directory)


def _frame_ends(path: Path) -> list[int]:
    return [frame.end for frame in scan_log(path).frames]


def test_truncation_at_every_offset_of_the_last_three_commits(store: SessionStore) -> None:
    session_id, log = _build(store, 3)
    original = log.read_bytes()
    index = log.with_suffix(".idx")
    original_index = index.read_bytes()
    ends = _frame_ends(log)
    start = ends[-4]
    for cut in range(start, len(original)):
        index.write_bytes(original_index)
        tear_log(log, original[:cut])
        whole = [end for end in ends if end <= cut]
        writer = store.open_writer(session_id)
        try:
            assert writer.projection.commits >= len(whole)
            assert writer.cut_tail is None if cut in whole else writer.cut_tail is not None
        finally:
            writer.close()
        # The writer cut the tail; a closed-turn-as-interrupted commit may follow.
        after = scan_log(log)
        assert after.torn_tail is None and after.corruption is None
        assert [f.end for f in after.frames[: len(whole)]] == whole


def test_reader_never_truncates_and_sees_only_whole_frames(store: SessionStore) -> None:
    session_id, log = _build(store, 2)
    original = log.read_bytes()
    ends = _frame_ends(log)
    tear_log(log, original[: ends[-1] - 5])
    snapshot = store.read(session_id)
    assert len(snapshot.scan.frames) == len(ends) - 1
    assert snapshot.scan.torn_tail is not None
    assert log.stat().st_size == ends[-1] - 5  # untouched


def test_flipping_any_byte_is_detected(store: SessionStore) -> None:
    _, log = _build(store, 2)
    original = log.read_bytes()
    ends = _frame_ends(log)
    last_start = ends[-2]
    for offset in range(len(original)):
        damaged = bytearray(original)
        damaged[offset] ^= 0x41
        scan = scan_bytes(bytes(damaged))
        # Every commit here was written in full, the last one included: a flipped
        # byte is corruption wherever it is, never a torn tail to cut.
        assert scan.torn_tail is None, offset
        assert scan.corruption is not None, offset
        assert scan.corruption.code == "corrupt_log"
        assert scan.end <= offset
        if offset >= last_start:
            assert scan.corruption.details["offset"] == last_start
            assert len(scan.frames) == len(ends) - 1


def test_corrupt_log_is_readable_up_to_damage_but_not_writable(store: SessionStore) -> None:
    session_id, log = _build(store, 3)
    ends = _frame_ends(log)
    damaged = bytearray(log.read_bytes())
    damaged[ends[2] + HEADER_SIZE + 3] ^= 0xFF
    log.write_bytes(bytes(damaged))
    snapshot = store.read(session_id)
    assert snapshot.scan.corruption is not None
    assert snapshot.scan.corruption.details["offset"] == ends[2]
    assert snapshot.scan.corruption.details["afterSeq"] == snapshot.scan.last_seq
    assert len(snapshot.scan.frames) == 3
    with pytest.raises(CorruptLog):
        store.open_writer(session_id)
    assert log.read_bytes() == bytes(damaged)
    assert not store.is_being_written(session_id)  # the refused writer let the lease go


def test_newer_frame_version_is_refused_as_unsupported() -> None:
    frame = bytearray(encode_frame(1, [{"seq": 1, "type": "x", "ts": 0}]))
    frame[3] = 9
    import struct
    import zlib

    frame[12:16] = struct.pack("<I", zlib.crc32(bytes(frame[:12])))
    with pytest.raises(UnsupportedFormat):
        decode_frame(bytes(frame), 0)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_random_bytes_give_only_typed_errors(data: bytes) -> None:
    with contextlib.suppress(Incomplete, BranchwiseError):
        decode_frame(data, 0)
    scan = scan_bytes(data)
    assert isinstance(scan, LogScan)


@settings(max_examples=200)
@given(st.binary(min_size=1, max_size=64), st.integers(min_value=0))
def test_random_bytes_after_good_frames_never_break_the_scan(junk: bytes, seed: int) -> None:
    good = encode_frame(
        1, [{"seq": 1, "type": "session/created", "ts": 0, "title": "", "kind": "root"}]
    )
    scan = scan_bytes(good + junk)
    assert len(scan.frames) == 1
    assert scan.corruption is None or isinstance(scan.corruption, CorruptLog)


def test_out_of_sequence_frame_is_damage() -> None:
    first = encode_frame(1, [{"seq": 1, "type": "t", "ts": 0}])
    skipped = encode_frame(3, [{"seq": 2, "type": "t", "ts": 0}])
    scan = scan_bytes(first + skipped)
    # Whole and checksummed, so written in full: not a torn write, and never cut.
    assert len(scan.frames) == 1 and scan.torn_tail is None and scan.corruption is not None
    with pytest.raises(InvalidFrame):
        from branchwise.core.log.scan import _check_sequence

        _check_sequence(decode_frame(skipped, 0), 2, 2)


def test_writer_cuts_torn_tail_and_appends_after_it(tmp_path: Path) -> None:
    path = tmp_path / "events.log"
    writer = LogWriter(path, LogScan(), untimed=frozenset())
    writer.append([{"type": "a"}])
    writer.close()
    with open(path, "ab") as handle:
        handle.write(b"\xffBW\x01garbage")
    scan = scan_log(path)
    writer = LogWriter(path, scan, untimed=frozenset())
    assert writer.cut_tail is not None and writer.cut_tail.length == 11
    writer.append([{"type": "b"}])
    writer.close()
    rescan = scan_log(path)
    assert [f.events[0]["seq"] for f in rescan.frames] == [1, 2]
    assert rescan.torn_tail is None
    assert os.path.getsize(path) == rescan.end
