"""Whether the bytes a fork links, or fork targets vouch for, are whole: checksums only.

A fork links a source's segments as the child's seeds after reading one
frame per segment (its bound), and cold fork targets come from the turn
records, not the frames. Neither would notice a bit flipped inside the bytes
in between: the fork would make a child damaged from birth and the targets
would list turns that ``show`` refuses as ``corrupt_log``. So both walk the
frames of the range they rely on, header to header, checking each header's
and payload's CRC32 (no JSON is decoded), and refuse ``corrupt_log`` naming
the file and byte.

That walk reads every byte once, so a file's result is kept for the process,
per file (device and inode): a sealed segment or a seed never changes, so it
is checked once however often it is forked; a growing active segment is
checked only past the end checked before. A file whose size or mtime changed
without growing (written in place) is checked again from its start.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path

from branchwise.core.errors import CorruptLog
from branchwise.core.fs.safe_open import open_no_follow
from branchwise.core.log.frames import HEADER, HEADER_SIZE, MAGIC

_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class _Checked:
    """What is known whole of one file: its first ``end`` bytes, at this size and mtime."""

    size: int
    mtime_ns: int
    end: int


_checked: dict[tuple[int, int], _Checked] = {}
_lock = threading.Lock()


def damaged_at(data: bytes | memoryview, start: int, end: int) -> int | None:
    """The offset of the first frame in ``data[start:end]`` whose header or payload fails its
    CRC32 or that does not end by ``end``; ``None`` when the range is whole frames."""
    offset = start
    unpack, crc32 = HEADER.unpack_from, zlib.crc32
    while offset < end:
        if end - offset < HEADER_SIZE:
            return offset
        magic, _version, length, crc, hcrc = unpack(data, offset)
        payload = offset + HEADER_SIZE
        if (
            magic != MAGIC
            or crc32(data[offset : offset + 12]) != hcrc
            or payload + length > end
            or crc32(data[payload : payload + length]) != crc
        ):
            return offset
        offset = payload + length
    return None


def _read_range(fd: int, start: int, end: int) -> bytes:
    parts = []
    offset = start
    while offset < end:
        piece = os.pread(fd, min(_CHUNK, end - offset), offset)
        if not piece:
            break
        parts.append(piece)
        offset += len(piece)
    return b"".join(parts)


def check_linked_range(path: Path, end: int, name: str | None = None) -> None:
    """Make sure the first ``end`` bytes of ``path`` are whole frames.

    ``name`` is the file's name in the session as errors give it (a seed's
    own name); the path's name by default.

    Raises:
        CorruptLog: a frame in the range fails its checksum, or the file is
            missing or shorter than ``end``.
    """
    label = name or path.name
    with contextlib.suppress(OSError):
        status = os.lstat(path)  # the common case, a file checked before: one system call
        with _lock:
            known = _checked.get((status.st_dev, status.st_ino))
        if (
            known is not None
            and stat.S_ISREG(status.st_mode)
            and (known.size, known.mtime_ns) == (status.st_size, status.st_mtime_ns)
            and known.end >= end
        ):
            return
    try:
        fd = open_no_follow(path, os.O_RDONLY)
    except OSError as exc:
        raise CorruptLog(f"{label} cannot be read: {exc.strerror}", file=label, offset=0) from exc
    try:
        status = os.fstat(fd)
        if status.st_size < end:
            raise CorruptLog(
                f"{label} holds {status.st_size} bytes, fewer than the {end} it must",
                file=label,
                offset=status.st_size,
            )
        key = (status.st_dev, status.st_ino)
        with _lock:
            known = _checked.get(key)
        start = 0
        if known is not None:
            unchanged = (known.size, known.mtime_ns) == (status.st_size, status.st_mtime_ns)
            if unchanged and known.end >= end:
                return
            if status.st_size > known.size and known.end <= end:
                start = known.end  # appended to since: only the new frames
        data = _read_range(fd, start, end)
    finally:
        os.close(fd)
    bad = damaged_at(data, 0, len(data))
    if bad is None and start + len(data) < end:
        bad = len(data)
    if bad is not None and start > 0:
        _forget(key)
        check_linked_range(path, end, name)  # not an append after all: check it whole
        return
    if bad is not None:
        raise CorruptLog(
            f"the commit at byte {bad} of {label} is damaged (its checksum fails)",
            file=label,
            offset=bad,
        )
    with _lock:
        known = _checked.get(key)
        if known is None or known.end <= end or known.size != status.st_size:
            _checked[key] = _Checked(status.st_size, status.st_mtime_ns, end)


def _forget(key: tuple[int, int]) -> None:
    with _lock:
        _checked.pop(key, None)
