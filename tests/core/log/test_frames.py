"""The one frame reader: ranges, the cut at a seq, and the header hop."""

from __future__ import annotations

import zlib
from typing import Any

import pytest

from branchwise.core.errors import InvalidFrame, UnsupportedFormat
from branchwise.core.log.frames import (
    FRAME_VERSION,
    HEADER_SIZE,
    encode_frame,
    frame_offsets,
    iter_frames,
)
from branchwise.core.log.scan import scan_bytes


def _log(sizes: list[int]) -> bytes:
    """Commits of ``sizes`` events each, seqs dense from 1."""
    out, seq = bytearray(), 0
    for number, size in enumerate(sizes, start=1):
        events: list[dict[str, Any]] = []
        for _ in range(size):
            seq += 1
            events.append({"seq": seq, "ts": 0.0, "type": "x"})
        out += encode_frame(number, events)
    return bytes(out)


def test_a_range_reads_the_rest_of_a_log_from_a_frame_end() -> None:
    buf = _log([2, 0, 3, 1])
    whole = list(iter_frames(buf))
    assert [f.commit for f in whole] == [1, 2, 3, 4]
    second = whole[1]
    rest = list(iter_frames(buf, start=second.end, first_commit=3, first_seq=3))
    assert rest == whole[2:]
    assert list(iter_frames(buf, start=second.end, first_commit=4, first_seq=3)) == []
    assert list(iter_frames(buf, start=second.end, first_commit=3, first_seq=4)) == []


@pytest.mark.parametrize(
    ("through", "commits"),
    [
        (0, [1]),
        (1, [1]),
        (2, [1]),
        (3, [1, 2, 3]),
        (4, [1, 2, 3]),
        (6, [1, 2, 3, 4]),
        (99, [1, 2, 3, 4]),
    ],
)
def test_through_seq_stops_after_the_frame_holding_it(through: int, commits: list[int]) -> None:
    buf = _log([2, 0, 3, 1])  # seqs 1-2 | none | 3-5 | 6
    assert [f.commit for f in iter_frames(buf, through_seq=through)] == commits


def test_a_newer_frame_version_is_refused_not_read_as_damage() -> None:
    frame = bytearray(
        encode_frame(1, [{"seq": 1, "ts": 1.0, "type": "session/title", "title": "x"}])
    )
    frame[3] = FRAME_VERSION + 1
    frame[12:16] = zlib.crc32(bytes(frame[:12])).to_bytes(4, "little")
    with pytest.raises(UnsupportedFormat):
        list(iter_frames(bytes(frame)))
    with pytest.raises(UnsupportedFormat):
        scan_bytes(bytes(frame))
    with pytest.raises(UnsupportedFormat):
        frame_offsets(bytes(frame))


def test_header_hop_finds_the_frames_the_reader_reads() -> None:
    buf = _log([1, 4, 0, 2])
    assert frame_offsets(buf) == [f.offset for f in iter_frames(buf)]
    last = frame_offsets(buf)[-1]
    assert frame_offsets(buf[: last + HEADER_SIZE + 1]) == frame_offsets(buf)[:-1]  # torn tail
    assert frame_offsets(buf[: last + 3]) == frame_offsets(buf)[:-1]  # torn header
    assert frame_offsets(b"") == []


def test_header_hop_refuses_a_damaged_header() -> None:
    buf = bytearray(_log([1, 1, 1]))
    second = frame_offsets(bytes(buf))[1]
    buf[second + 5] ^= 0x01  # the length field: the header checksum no longer matches
    with pytest.raises(InvalidFrame):
        frame_offsets(bytes(buf))
    with pytest.raises(InvalidFrame):
        frame_offsets(b"garbage" + _log([1]))
