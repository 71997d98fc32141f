"""The binary ``.tix``: what the writer appends, what readers keep of a damaged one, old layouts.

Cold fork targets read it instead of replaying; it is a cache, so whatever
happens to it (torn, damaged, an older layout) the targets must equal a replay's.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.segmented import read_turn_rows
from helpers.sessions import complete_turn

from branchwise.core.fork.targets import fork_targets, targets_from_projection
from branchwise.core.log.frames import encode_record
from branchwise.core.log.segments import log_pieces
from branchwise.core.log.sidecars import TURNS_SUFFIX
from branchwise.core.store.store import SessionStore


def segments(store: SessionStore, session_id: str) -> list[Path]:
    directory = store.session_dir(session_id)
    return [piece.path for piece in log_pieces(directory, store.manifest(session_id))]


def replayed(store: SessionStore, session_id: str) -> object:
    snapshot = store.read(session_id)
    return targets_from_projection(snapshot.projection, snapshot.manifest)


@pytest.fixture
def session(store: SessionStore) -> str:
    """Ten turns written by two writers (the second appends to the first's ``.tix``)."""
    with store.create("tix") as writer:
        for n in range(6):
            complete_turn(writer, f"t{n}", f"question {n}")
        session_id = writer.session_id
    with store.open_writer(session_id) as writer:
        for n in range(6, 10):
            complete_turn(writer, f"t{n}", f"question {n}")
    return session_id


def test_the_rows_are_every_closed_turn_in_order_and_vouched_by_one_crc(
    store: SessionStore, session: str
) -> None:
    (segment,) = segments(store, session)
    rows = read_turn_rows(segment)
    turns = store.read(session).projection.turns
    assert rows is not None
    assert [(r.turn_id, r.message_id, r.last_seq, r.number) for r in rows] == [
        (t.turn_id, t.message_id, t.boundary_sequence, t.index) for t in turns
    ]
    assert fork_targets(store, session) == replayed(store, session)


def test_rolled_segments_each_hold_their_own_turns(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, roll_bytes=600)
    with store.create("rolls") as writer:
        for n in range(12):
            complete_turn(writer, f"t{n}", f"question {n}")
        session_id = writer.session_id
    pieces = segments(store, session_id)
    assert len(pieces) > 2
    ids = [row.turn_id for piece in pieces for row in read_turn_rows(piece) or []]
    assert ids == [f"t{n}" for n in range(12)]
    assert fork_targets(store, session_id) == replayed(store, session_id)


@pytest.mark.parametrize("where", [0.3, 0.6, 0.95])
def test_a_damaged_byte_keeps_the_records_before_it_and_the_targets_right(
    store: SessionStore, session: str, where: float
) -> None:
    (segment,) = segments(store, session)
    tix = segment.with_suffix(TURNS_SUFFIX)
    data = bytearray(tix.read_bytes())
    before = read_turn_rows(segment)
    at = 16 + int((len(data) - 16) * where)
    data[at] ^= 0x20
    tix.write_bytes(bytes(data))
    rows = read_turn_rows(segment)
    assert rows is not None and before is not None
    assert len(rows) < len(before) and rows == before[: len(rows)]
    assert fork_targets(store, session) == replayed(store, session)


def test_a_torn_last_record_is_left_out(store: SessionStore, session: str) -> None:
    (segment,) = segments(store, session)
    tix = segment.with_suffix(TURNS_SUFFIX)
    before = read_turn_rows(segment)
    with open(tix, "r+b") as handle:
        handle.truncate(os.path.getsize(tix) - 7)
    assert read_turn_rows(segment) == (before or [])[:-1]
    assert fork_targets(store, session) == replayed(store, session)


def test_the_earlier_json_layout_is_not_used_and_a_writer_rewrites_it(
    store: SessionStore, session: str
) -> None:
    (segment,) = segments(store, session)
    tix = segment.with_suffix(TURNS_SUFFIX)
    old = b"".join(
        encode_record({"turnId": f"t{n}", "messageId": f"a-t{n}", "startSeq": 1, "index": n + 1})
        for n in range(10)
    )
    tix.write_bytes(old)
    assert read_turn_rows(segment) is None
    assert fork_targets(store, session) == replayed(store, session)
    store.open_writer(session).close()  # a writer open rebuilds the active segment's caches
    assert len(read_turn_rows(segment) or []) == 10
    assert fork_targets(store, session) == replayed(store, session)


def test_a_missing_turn_file_only_costs_the_replay(store: SessionStore, session: str) -> None:
    (segment,) = segments(store, session)
    segment.with_suffix(TURNS_SUFFIX).unlink()
    assert read_turn_rows(segment) is None
    assert fork_targets(store, session) == replayed(store, session)
