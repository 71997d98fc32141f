"""The frame format of ``events.log`` and its one reader (pure: bytes in, values out).

A frame is one commit: a 16-byte header followed by an orjson payload
``{"commit": n, "events": [...]}``.

Header layout (little-endian)::

    magic    3 bytes  b"\\xffBW"  (0xFF never occurs in UTF-8, so the magic
                                   cannot appear inside a JSON payload)
    version  1 byte   1, or 2 for a commit holding a message/delta
    length   4 bytes  payload length
    crc      4 bytes  CRC32 of the payload
    hcrc     4 bytes  CRC32 of the first 12 header bytes

The header checksum lets a scan tell a damaged length field from a frame that
is merely incomplete.

Version 2 frames differ only in what their events may mean: they hold
``message/delta`` events (a streaming answer's new text since the
previous partial commit; :func:`~branchwise.core.projection.events.assistant_delta`).
A build that predates deltas would skip that event type and show a shortened
answer; instead it meets a frame version it does not know and refuses the log
with ``unsupported_format``, naming the offset. Every other commit is still
written as version 1, which every build reads.

One size limit, :data:`MAX_PAYLOAD`, binds every writer and every reader: the
encoder refuses a bigger payload (:class:`~branchwise.core.errors.CommitTooLarge`,
before any byte is written), and every reader stops before a frame announcing
one, so a session, its fork targets and its forks always see the same
commits. The limit is read when called, never copied, so the one constant is
the limit everywhere.

Every reader of committed history goes through :func:`iter_frames` (the log
scan, fork targets, the fork's cut); :func:`frame_offsets` hops from header to
header for readers that decode only a few frames from the end.
:func:`decode_frame` decodes one frame at a known offset and says precisely
why it is not a frame, which is how a scan tells a torn tail from corruption
after :func:`iter_frames` stopped.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import Any, NamedTuple

import orjson

from branchwise.core.errors import CommitTooLarge, InvalidFrame, UnsupportedFormat

MAGIC = b"\xffBW"
FRAME_VERSION = 2
"""The newest frame version this build reads (and writes for commits holding a delta)."""
_PLAIN_VERSION = 1
# The delta event's type as orjson writes it: inside a JSON string every quote is
# escaped, so these bytes occur only as a real "type" member of the payload.
_DELTA_MARK = b'"type":"message/delta"'
HEADER = struct.Struct("<3sBIII")
HEADER_SIZE = HEADER.size
MAX_PAYLOAD = 256 * 1024 * 1024
"""The largest payload of one commit, in bytes (256 MiB), for writers and readers alike."""
_HEAD = struct.Struct("<3sBII")  # the header bytes its own checksum covers
_HCRC = struct.Struct("<I")


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


# tuple.__new__ skips the named tuple's Python-level __new__: a third of the
# per-frame cost of iterating a log of small commits.
_new_frame = tuple.__new__


def _header(payload: bytes, version: int = _PLAIN_VERSION) -> bytes:
    if len(payload) > MAX_PAYLOAD:
        raise CommitTooLarge(
            f"a commit of {len(payload)} bytes is over the limit of {MAX_PAYLOAD} bytes",
            size=len(payload),
            limit=MAX_PAYLOAD,
        )
    head = _HEAD.pack(MAGIC, version, len(payload), zlib.crc32(payload))
    return head + _HCRC.pack(zlib.crc32(head))


def encode_frame(commit: int, events: list[dict[str, Any]]) -> bytes:
    """Serialize one commit to frame bytes.

    Raises:
        CommitTooLarge: the payload is over :data:`MAX_PAYLOAD`.
    """
    payload = orjson.dumps({"commit": commit, "events": events})
    return _header(payload, _version_of(payload)) + payload


def _version_of(payload: bytes) -> int:
    """The frame version a commit's payload needs: 2 when it holds a delta, else 1."""
    return FRAME_VERSION if _DELTA_MARK in payload else _PLAIN_VERSION


class Incomplete(Exception):
    """The buffer ends before the frame does (a torn or still-growing tail)."""


def _payload_length(buf: bytes | memoryview, offset: int) -> tuple[int, int]:
    """The payload length and checksum the header at ``offset`` announces, once it is verified.

    Raises:
        Incomplete: the buffer ends inside the header.
        InvalidFrame: not a frame header (magic, checksum or version).
        UnsupportedFormat: a valid header of a newer frame version.
        CommitTooLarge: a valid header announcing a payload over :data:`MAX_PAYLOAD`.
    """
    if len(buf) - offset < HEADER_SIZE:
        raise Incomplete
    magic, version, length, crc, hcrc = HEADER.unpack_from(buf, offset)
    if magic != MAGIC:
        raise InvalidFrame("bad frame magic", offset=offset)
    if zlib.crc32(buf[offset : offset + 12]) != hcrc:
        raise InvalidFrame("frame header checksum mismatch", offset=offset)
    if version > FRAME_VERSION:
        raise UnsupportedFormat(
            f"frame version {version} is newer than supported {FRAME_VERSION}", offset=offset
        )
    if version < 1:
        raise InvalidFrame("bad frame header", offset=offset)
    if length > MAX_PAYLOAD:
        raise CommitTooLarge(
            f"the commit at byte {offset} is {length} bytes, over the limit of {MAX_PAYLOAD} bytes",
            offset=offset,
            size=length,
            limit=MAX_PAYLOAD,
        )
    return length, crc


def decode_frame(buf: bytes | memoryview, offset: int) -> Frame:
    """Decode the frame starting at ``offset`` of ``buf`` (no sequence checks).

    Raises:
        Incomplete: the buffer ends inside this frame.
        InvalidFrame: the bytes at ``offset`` are not a valid frame.
        UnsupportedFormat: a valid header of a newer frame version.
        CommitTooLarge: a valid header announcing a payload over :data:`MAX_PAYLOAD`.
    """
    length, crc = _payload_length(buf, offset)
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
        except (Incomplete, InvalidFrame, UnsupportedFormat, CommitTooLarge):
            pos = data.find(MAGIC, pos + 1)
            continue
        return pos
    return None


def iter_frames(
    buf: bytes | memoryview,
    *,
    start: int = 0,
    first_commit: int = 1,
    first_seq: int = 1,
    through_seq: int | None = None,
) -> Iterator[Frame]:
    """Every whole, verified commit of a log buffer from ``start`` on, in order.

    Args:
        buf: the log's bytes (or a view of them); offsets are into ``buf``.
        start: where the first frame starts (the end of a frame read before).
        first_commit: the commit number the first frame must carry.
        first_seq: the seq its first event must carry.
        through_seq: stop after the frame holding this seq (or the first
            frame past it), as a cut at a boundary does.

    Stops silently at the first frame that is incomplete, damaged, over
    :data:`MAX_PAYLOAD`, or out of commit/seq sequence: whatever follows is a
    torn tail or corruption, and neither is committed history
    (:mod:`~branchwise.core.log.scan` tells which). Each frame must carry the
    next commit number and its events the next dense run of seqs; checking the
    first and last seq is enough, as the checksum vouches for the bytes in
    between.

    Raises:
        UnsupportedFormat: a frame with a valid header of a newer version.
    """
    view = memoryview(buf)
    offset, commit, seq, size, limit = start, first_commit, first_seq, len(view), MAX_PAYLOAD
    unpack, crc32, loads, new = HEADER.unpack_from, zlib.crc32, orjson.loads, _new_frame
    while size - offset >= HEADER_SIZE:
        magic, version, length, crc, hcrc = unpack(view, offset)
        if magic != MAGIC or crc32(view[offset : offset + 12]) != hcrc:
            return
        if version > FRAME_VERSION:
            raise UnsupportedFormat(
                f"frame version {version} is newer than supported {FRAME_VERSION}",
                offset=offset,
            )
        if version < _PLAIN_VERSION:
            return
        end = offset + HEADER_SIZE + length
        if end > size or length > limit:
            return
        payload = view[offset + HEADER_SIZE : end]
        if crc32(payload) != crc:
            return
        try:
            body = loads(payload)
        except orjson.JSONDecodeError:
            return
        if type(body) is not dict or body.get("commit") != commit:
            return
        events = body.get("events")
        if type(events) is not list:
            return
        count = len(events)
        if count:
            first, last = events[0], events[-1]
            if not (
                type(first) is dict
                and type(last) is dict
                and first.get("seq") == seq
                and last.get("seq") == seq + count - 1
            ):
                return
        yield new(Frame, (commit, events, offset, end))
        offset, commit, seq = end, commit + 1, seq + count
        if through_seq is not None and count and seq > through_seq:
            return


def frame_offsets(buf: bytes | memoryview) -> list[int]:
    """Where each whole frame of a log starts, hopping header to header.

    Only headers are verified (magic, checksum, version), not payloads: a
    reader that decodes a few frames from the end (the transcript preview)
    finds them without decoding the rest. Stops at a frame the buffer ends
    inside (a torn or still-growing tail).

    Raises:
        InvalidFrame: a header is damaged where the previous frame ends.
        UnsupportedFormat: a frame of a newer version.
        CommitTooLarge: a frame over :data:`MAX_PAYLOAD`.
    """
    offsets: list[int] = []
    offset, size = 0, len(buf)
    while True:
        try:
            length, _ = _payload_length(buf, offset)
        except Incomplete:
            return offsets
        end = offset + HEADER_SIZE + length
        if end > size:
            return offsets
        offsets.append(offset)
        offset = end


def encode_record(record: dict[str, Any]) -> bytes:
    """One sidecar record (``.tix``, ``.blobs``) in the frame layout: header, then orjson.

    Not a commit: records carry no commit number or seqs, so they are read by
    :func:`iter_records`, never by :func:`iter_frames`.
    """
    payload = orjson.dumps(record)
    return _header(payload) + payload


def iter_records(buf: bytes | memoryview) -> Iterator[dict[str, Any]]:
    """The whole, verified records of a sidecar file, stopping at the first that is not.

    A sidecar is a cache, so anything after a damaged or torn record is
    simply not used (the reader falls back to the log).
    """
    offset, size = 0, len(buf)
    while True:
        try:
            length, crc = _payload_length(buf, offset)
        except (Incomplete, InvalidFrame, UnsupportedFormat, CommitTooLarge):
            return
        end = offset + HEADER_SIZE + length
        if end > size:
            return
        payload = buf[offset + HEADER_SIZE : end]
        if zlib.crc32(payload) != crc:
            return
        try:
            record = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return
        if type(record) is not dict:
            return
        yield record
        offset = end
