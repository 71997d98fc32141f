"""A fast reader of committed frames: the whole, verified commits of a log buffer.

Fork targets and the fork engine both replay long logs; this reader inlines
the frame decoder and its sequence checks so the per-frame overhead stays
small (see :func:`iter_frames`).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

from .errors import UnsupportedFormat
from .frames import FRAME_VERSION, HEADER, HEADER_SIZE, MAGIC, MAX_PAYLOAD

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

    This is :func:`~branchwise.core.frames.decode_frame` plus the sequence
    checks of :func:`~branchwise.core.log.scan_bytes`, inlined: on a long log
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
