"""The turn table: every closed turn's ``.tix`` record of a session, in one file (a cache).

Cold fork targets of a long session read each segment's ``.tix``; parsing
80,000 binary records in Python costs about as much as everything else the
query does. The writer therefore keeps ``<log>/turns.cache``: the columns of
those records (turn id, message id, boundary seq, commit, flags), already
checked (turn numbers dense, no turn twice, seeds cut at their bound), with a
key naming the ``.tix`` bytes they were read from: per piece of the log its
name, its seed bound (``endCommit``), the length of the ``.tix`` prefix read
and the CRC32 of that prefix *without its last four bytes* (the last
record's chained CRC). A ``.tix`` only grows, so a key that matches stays
true: a reader checksums each prefix, decodes the table once and parses only
the records after the prefixes.

Why not the CRC32 of the whole prefix: a prefix that ends on a record ends
with the CRC32 of everything before it, and the CRC32 of any bytes followed by
their own CRC32 is one constant (the CRC residue). Such a key would match the
``.tix`` of every session of the same length and segment names, so another
session's table would be taken for this one's. The CRC32 before the last
record's chained CRC covers the turn and message ids, which differ per session.

It is a cache (docs/storage.md, "Invariants" 5): missing, cut short, any byte
flipped (the body's CRC32), another layout or tracker version, a piece
renamed, removed or added before the covered ones, a ``.tix`` rewritten or
damaged inside its covered prefix: the table is not used, the ``.tix`` files
are parsed as without it, and the answers are the same. Only the lease
holder writes it, when it closes (:func:`save_turn_table`), under a
temporary name then ``os.replace``, without fsync (a file a crash cut short
fails its CRC).

File layout: ``BWTT``, format (u16), tracker version (u16), the ``.tix``
bytes the key covers in all (u64, so a close that added few turns decides
by reading 24 bytes), body length (u32), CRC32 of the body (u32), then the
body: JSON ``{"pieces": [[name,
endCommit, length, crc, rows], ...], "turnIds", "messageIds", "lastSeqs",
"commits", "flags"}``.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from branchwise.core.fs.atomic import write_cache_file
from branchwise.core.fs.safe_open import open_no_follow
from branchwise.core.log.segments import Piece
from branchwise.core.log.sidecars import (
    TRACKER_VERSION,
    TURN_RECORD_MIN,
    TURNS_SUFFIX,
    parse_turn_rows,
    read_turn_file,
)

TABLE_FILE = "turns.cache"
_MAGIC = b"BWTT"
_VERSION = 2
"""2: the key's CRC32 stops before the last chained CRC (1 keyed on the CRC residue)."""
_HEAD = struct.Struct("<4sHHQII")
_CHAINED = struct.Struct("<I")
_MIN_RECORD = TURN_RECORD_MIN
MIN_NEW_ROWS = 1024
"""A close rewrites the table only when at least this many turn records are not in it yet."""


@dataclass(frozen=True, slots=True)
class TurnColumns:
    """Every closed turn the ``.tix`` files of a log record, column by column, checked.

    Attributes:
        turn_ids, message_ids, last_seqs, commits, flags: one entry per turn, in order.
        last_piece: the index of the piece holding the last turn's record (-1: no turn).
        parsed: how many records were parsed from ``.tix`` files (not taken from the table).
        key: the table key that describes these columns.
    """

    turn_ids: tuple[str, ...]
    message_ids: tuple[str | None, ...]
    last_seqs: tuple[int, ...]
    commits: tuple[int, ...]
    flags: tuple[int, ...]
    last_piece: int
    parsed: int
    key: tuple[tuple[str, int | None, int, int, int], ...]


def table_path(pieces: list[Piece]) -> Path | None:
    """Where the turn table of a segmented log lives (``None``: a format-1 log has none)."""
    if not pieces or pieces[0].path.suffix != ".seg":
        return None
    return pieces[0].path.parent / TABLE_FILE


def read_table(path: Path) -> dict[str, Any] | None:
    """The table's body if the file is whole and of this layout (``None`` otherwise)."""
    try:
        fd = open_no_follow(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read()
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) < _HEAD.size:
        return None
    magic, version, tracker, _covered, length, crc = _HEAD.unpack_from(data)
    body = memoryview(data)[_HEAD.size :]
    if (magic, version, tracker) != (_MAGIC, _VERSION, TRACKER_VERSION) or len(body) != length:
        return None
    if zlib.crc32(body) != crc:
        return None
    try:
        table = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return table if isinstance(table, dict) else None


def turn_columns(pieces: list[Piece], *, use_table: bool = True) -> TurnColumns | None:
    """The checked turn records of a log's ``.tix`` files, from the table where it holds.

    ``None`` when the ``.tix`` files cannot vouch: one missing or of another
    layout, or records that skip or repeat a turn (a turn that never closed,
    damage that cut a non-last file short); fork targets then replay.
    """
    path = table_path(pieces) if use_table else None
    table = read_table(path) if path is not None else None
    covered: list[Any] = []
    if table is not None:
        try:
            covered = list(table["pieces"])
            ids = list(table["turnIds"])
            message_ids = list(table["messageIds"])
            last_seqs = list(table["lastSeqs"])
            commits = list(table["commits"])
            flags = list(table["flags"])
        except (KeyError, TypeError):
            table = None
        if table is not None and not (
            len(covered) <= len(pieces)
            and len(ids) == len(message_ids) == len(last_seqs) == len(commits) == len(flags)
            and sum(_rows_of(entry) for entry in covered) == len(ids)
        ):
            table = None
    if table is None:
        covered, ids, message_ids, last_seqs, commits, flags = [], [], [], [], [], []
    seen: set[str] | None = None  # the ids so far, built when a record is parsed
    key: list[tuple[str, int | None, int, int, int]] = []
    parsed = 0
    last_piece = -1
    count = 0
    for number, piece in enumerate(pieces):
        data = read_turn_file(piece.path)
        if data is None:
            return None
        bound = piece.seed.end_commit if piece.seed is not None else None
        start, chain = 16, zlib.crc32(data[:16])
        if number < len(covered):
            entry = covered[number]
            if not _matches(entry, piece.name, bound, data):
                return turn_columns(pieces, use_table=False)
            start, count = entry[2], entry[4]
            chain = _chain_through(data, start, entry[3])
            if count:
                last_piece = number
        rows, end, end_chain = parse_turn_rows(data, start, chain)
        if bound is not None:
            rows = [row for row in rows if row.commit <= bound]
        if rows:
            parsed += len(rows)
            if seen is None:
                seen = set(ids)
            first = len(ids) + 1
            for row in rows:
                if row.number != first or row.turn_id in seen:
                    if table is not None:
                        return turn_columns(pieces, use_table=False)
                    return None  # a turn that never closed, or closed twice: replay decides
                first += 1
                seen.add(row.turn_id)
                ids.append(row.turn_id)
                message_ids.append(row.message_id)
                last_seqs.append(row.last_seq)
                commits.append(row.commit)
                flags.append(row.flags)
            last_piece = number
            count += len(rows)
        key.append((piece.name, bound, end, _key_crc(data, end, end_chain), count))
        count = 0
    return TurnColumns(
        tuple(ids),
        tuple(message_ids),
        tuple(last_seqs),
        tuple(commits),
        tuple(flags),
        last_piece,
        parsed,
        tuple(key),
    )


def _rows_of(entry: Any) -> int:
    """How many turns a table key entry says its piece holds (-1: not an entry)."""
    rows = entry[4] if isinstance(entry, list) and len(entry) == 5 else None
    return rows if isinstance(rows, int) and rows >= 0 else -(10**9)


def _key_crc(data: bytes, end: int, chain: int) -> int:
    """The key's CRC32 of ``data[:end]`` (a verified record end): the bytes before its last CRC.

    ``chain`` is the CRC32 of the whole prefix. Past the header, the last
    four bytes are the CRC32 of the bytes before them, already verified.
    """
    if end <= 16:
        return chain
    return int(_CHAINED.unpack_from(data, end - 4)[0])


def _chain_through(data: bytes, end: int, key_crc: int) -> int:
    """The CRC32 of ``data[:end]`` from a key's CRC (see :func:`_key_crc`), to parse on from."""
    if end <= 16:
        return key_crc
    return zlib.crc32(data[end - 4 : end], key_crc)


def _matches(entry: Any, name: str, bound: int | None, data: bytes) -> bool:
    """Whether a table key entry describes this piece and a prefix of its ``.tix``."""
    try:
        covered_name, covered_bound, length, crc, rows = entry
    except (TypeError, ValueError):
        return False
    return (
        covered_name == name
        and covered_bound == bound
        and isinstance(length, int)
        and isinstance(rows, int)
        and 16 <= length <= len(data)
        and zlib.crc32(data[: length if length <= 16 else length - 4]) == crc
    )


def table_bytes(columns: TurnColumns) -> bytes:
    """The file holding ``columns`` (header and body)."""
    body = orjson.dumps(
        {
            "pieces": columns.key,
            "turnIds": columns.turn_ids,
            "messageIds": columns.message_ids,
            "lastSeqs": columns.last_seqs,
            "commits": columns.commits,
            "flags": columns.flags,
        }
    )
    covered = sum(entry[2] for entry in columns.key)
    head = _HEAD.pack(_MAGIC, _VERSION, TRACKER_VERSION, covered, len(body), zlib.crc32(body))
    return head + body


def _few_new_records(path: Path, pieces: list[Piece], min_new_rows: int) -> bool:
    """Whether the ``.tix`` files have grown too little past the table for ``min_new_rows``.

    Reads the table's header and the files' sizes only (a record takes at
    least 40 bytes). False when unsure (no table, another layout).
    """
    try:
        fd = open_no_follow(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        head = os.pread(fd, _HEAD.size, 0)
        sizes = sum(os.stat(p.path.with_suffix(TURNS_SUFFIX)).st_size for p in pieces)
    except OSError:
        return False
    finally:
        os.close(fd)
    if len(head) < _HEAD.size:
        return False
    magic, version, tracker, covered, _length, _crc = _HEAD.unpack(head)
    if (magic, version, tracker) != (_MAGIC, _VERSION, TRACKER_VERSION):
        return False
    return sizes - covered < min_new_rows * _MIN_RECORD


def save_turn_table(pieces: list[Piece], min_new_rows: int = MIN_NEW_ROWS) -> bool:
    """Rewrite the table when at least ``min_new_rows`` records are not in it (best effort).

    Called by the lease holder as it closes (its sidecars are synced by
    then). Returns whether it wrote.
    """
    path = table_path(pieces)
    if path is None:
        return False
    if _few_new_records(path, pieces, min_new_rows):
        return False
    columns = turn_columns(pieces)
    if columns is None or columns.parsed < min_new_rows:
        return False
    return write_cache_file(path, table_bytes(columns))
