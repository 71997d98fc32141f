"""The frame format of ``events.log`` (pure: bytes in, values out).

A frame is one commit: a 16-byte header followed by an orjson payload
``{"commit": n, "events": [...]}``.

Header layout (little-endian)::

    magic    3 bytes  b"\\xffBW"  (0xFF never occurs in UTF-8, so the magic
                                   cannot appear inside a JSON payload)
    version  1 byte   FRAME_VERSION
    length   4 bytes  payload length
    crc      4 bytes  CRC32 of the payload
    hcrc     4 bytes  CRC32 of the first 12 header bytes

The header checksum lets a scan tell a damaged length field from a frame that
is merely incomplete.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from branchwise.core.errors import InvalidFrame, UnsupportedFormat

MAGIC = b"\xffBW"
FRAME_VERSION = 1
HEADER = struct.Struct("<3sBIII")
HEADER_SIZE = HEADER.size
MAX_PAYLOAD = 256 * 1024 * 1024


class Frame(NamedTuple):
    """One decoded commit (a named tuple: scans build tens of thousands of these).

    Attributes:
        commit: the commit number (1, 2, 3… dense).
        events: the events of this commit, as stored dicts.
        offset: byte offset of the frame in the log.
        end: byte offset just past the frame.
    """

    commit: int
    events: list[dict[str, Any]]
    offset: int
    end: int


def encode_frame(commit: int, events: list[dict[str, Any]]) -> bytes:
    """Serialize one commit to frame bytes."""
    payload = orjson.dumps({"commit": commit, "events": events})
    head = struct.pack("<3sBI", MAGIC, FRAME_VERSION, len(payload))
    crc = zlib.crc32(payload)
    head += struct.pack("<I", crc)
    return head + struct.pack("<I", zlib.crc32(head)) + payload


class Incomplete(Exception):
    """The buffer ends before the frame does (a torn or still-growing tail)."""


def decode_frame(buf: bytes | memoryview, offset: int) -> Frame:
    """Decode the frame starting at ``offset`` of ``buf``.

    Raises:
        Incomplete: the buffer ends inside this frame.
        InvalidFrame: the bytes at ``offset`` are not a valid frame.
        UnsupportedFormat: a valid header of a newer frame version.
    """
    if len(buf) - offset < HEADER_SIZE:
        raise Incomplete
    magic, version, length, crc, hcrc = HEADER.unpack_from(buf, offset)
    if magic != MAGIC:
        raise InvalidFrame("bad frame magic", offset=offset)
    if zlib.crc32(bytes(buf[offset : offset + 12])) != hcrc:
        raise InvalidFrame("frame header checksum mismatch", offset=offset)
    if version > FRAME_VERSION:
        raise UnsupportedFormat(
            f"frame version {version} is newer than supported {FRAME_VERSION}", offset=offset
        )
    if version < 1 or length > MAX_PAYLOAD:
        raise InvalidFrame("bad frame header", offset=offset)
    start = offset + HEADER_SIZE
    end = start + length
    if end > len(buf):
        raise Incomplete
    payload = buf[start:end]
    if zlib.crc32(payload) != crc:
        raise InvalidFrame("frame payload checksum mismatch", offset=offset)
    try:
        body = orjson.loads(payload)
        commit = body["commit"]
        events = body["events"]
    except (orjson.JSONDecodeError, TypeError, KeyError) as exc:
        raise InvalidFrame(f"frame payload is not a commit: {exc}", offset=offset) from exc
    if not isinstance(commit, int) or not isinstance(events, list):
        raise InvalidFrame("frame payload has the wrong shape", offset=offset)
    return Frame(commit=commit, events=events, offset=offset, end=end)


def find_next_frame(buf: bytes | memoryview, start: int) -> int | None:
    """Offset of the next fully valid frame at or after ``start``, if any.

    Used after a bad frame to decide between a torn tail (nothing valid
    follows) and corruption (valid frames follow the damage).
    """
    data = bytes(buf) if isinstance(buf, memoryview) else buf
    pos = data.find(MAGIC, start)
    while pos != -1:
        try:
            decode_frame(data, pos)
        except (Incomplete, InvalidFrame, UnsupportedFormat):
            pos = data.find(MAGIC, pos + 1)
            continue
        return pos
    return None


_SEQ = itemgetter("seq")


def iter_commits(buf: bytes | memoryview) -> Iterator[list[dict[str, Any]]]:
    """The events of every whole, verified commit of a log buffer, in order (see below)."""
    for events, _, _ in iter_frames(buf):
        yield events


def iter_frames(
    buf: bytes | memoryview, first_commit: int = 1, first_seq: int = 1
) -> Iterator[tuple[list[dict[str, Any]], int, int]]:
    """Every whole, verified commit of a log buffer: ``(events, offset, end)``, in order.

    ``first_commit``/``first_seq`` are what the buffer's first frame must
    carry (a buffer holding the tail of a log starts past 1).

    Stops silently at the first frame that is incomplete, damaged, or out of
    commit/seq sequence: whatever follows is a torn tail or corruption, and
    neither is committed history. A newer frame version raises
    ``UnsupportedFormat`` (like every other reader).

    This is :func:`decode_frame` plus the sequence
    checks of :func:`~branchwise.core.log.scan.scan_bytes`, inlined: on a long log
    the per-frame overhead of the general decoder is a large share of a fork
    or a targets query. A test pins the two to the same verdicts.
    """
    view = memoryview(buf)
    offset, commit, seq, size = 0, first_commit, first_seq, len(view)
    unpack, crc32, loads = HEADER.unpack_from, zlib.crc32, orjson.loads
    while size - offset >= HEADER_SIZE:
        magic, version, length, crc, hcrc = unpack(view, offset)
        if magic != MAGIC or crc32(view[offset : offset + 12]) != hcrc:
            return
        if version > FRAME_VERSION:
            raise UnsupportedFormat(
                f"frame version {version} is newer than supported {FRAME_VERSION}",
                offset=offset,
            )
        start = offset + HEADER_SIZE
        end = start + length
        if version < 1 or length > MAX_PAYLOAD or end > size:
            return
        payload = view[start:end]
        if crc32(payload) != crc:
            return
        try:
            body = loads(payload)
            number, events = body["commit"], body["events"]
            if number != commit or not isinstance(number, int) or type(events) is not list:
                return
            count = len(events)
            if count and list(map(_SEQ, events)) != list(range(seq, seq + count)):
                return
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return
        yield events, offset, end
        offset, commit, seq = end, commit + 1, seq + count


def read_log_bytes(path: Path) -> bytes:
    """The whole log file (a missing log is an empty one)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
