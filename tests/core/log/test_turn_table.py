"""The turn table ``turns.cache``: written at close, read by cold fork targets, a cache.

Whatever happens to it (flipped, cut short, another session's, a ``.tix``
rewritten under it) the targets must equal a replay's; when it holds, the
``.tix`` records it covers are not parsed again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.forking import fork_at
from helpers.sessions import complete_turn, session_with_turns

from branchwise.core.fork.targets import ForkTargetSet, fork_targets, targets_from_projection
from branchwise.core.log.segments import log_pieces
from branchwise.core.log.sidecars import TURNS_SUFFIX
from branchwise.core.log.turn_table import (
    MIN_NEW_ROWS,
    TABLE_FILE,
    read_table,
    save_turn_table,
    turn_columns,
)
from branchwise.core.store.store import SessionStore


def replayed(store: SessionStore, session_id: str) -> ForkTargetSet:
    snapshot = store.read(session_id)
    return targets_from_projection(snapshot.projection, snapshot.manifest)


def table_of(store: SessionStore, session_id: str) -> Path:
    return store.session_dir(session_id) / store.manifest(session_id).log_dir / TABLE_FILE


def parsed(store: SessionStore, session_id: str) -> int:
    pieces = log_pieces(store.session_dir(session_id), store.manifest(session_id))
    columns = turn_columns(pieces)
    assert columns is not None
    return columns.parsed


def saved(store: SessionStore, session_id: str) -> bool:
    pieces = log_pieces(store.session_dir(session_id), store.manifest(session_id))
    return save_turn_table(pieces, min_new_rows=1)


@pytest.fixture
def session(store: SessionStore) -> str:
    session_id = session_with_turns(store, 12, "table")
    assert saved(store, session_id)
    return session_id


def test_a_close_after_many_new_turns_writes_the_table_and_targets_then_parse_nothing(
    store: SessionStore,
) -> None:
    session_id = session_with_turns(store, MIN_NEW_ROWS, "long")
    assert read_table(table_of(store, session_id)) is not None
    assert parsed(store, session_id) == 0
    assert fork_targets(store, session_id) == replayed(store, session_id)


def test_a_close_after_few_new_turns_leaves_the_table_alone(store: SessionStore) -> None:
    session_id = session_with_turns(store, 5, "short")
    assert not table_of(store, session_id).exists()
    assert fork_targets(store, session_id) == replayed(store, session_id)


def test_turns_after_the_table_are_parsed_from_the_tix_alone(
    store: SessionStore, session: str
) -> None:
    with store.open_writer(session) as writer:
        complete_turn(writer, "later-1")
        complete_turn(writer, "later-2")
    assert parsed(store, session) == 2
    answer = fork_targets(store, session)
    assert answer == replayed(store, session)
    assert [t.turn_id for t in answer.targets][-2:] == ["later-1", "later-2"]


@pytest.mark.parametrize("at", [0, 5, 17, -3, -1])
def test_a_flipped_byte_anywhere_in_the_table_means_it_is_not_used(
    store: SessionStore, session: str, at: int
) -> None:
    path = table_of(store, session)
    data = bytearray(path.read_bytes())
    data[at] ^= 0x20
    path.write_bytes(bytes(data))
    assert read_table(path) is None
    assert parsed(store, session) == 12
    assert fork_targets(store, session) == replayed(store, session)


def test_a_table_cut_short_is_not_used(store: SessionStore, session: str) -> None:
    path = table_of(store, session)
    path.write_bytes(path.read_bytes()[:-7])
    assert parsed(store, session) == 12
    assert fork_targets(store, session) == replayed(store, session)


def test_another_sessions_table_with_a_valid_crc_is_not_trusted(store: SessionStore) -> None:
    """Same segment name and bound, a whole table: only the ``.tix`` prefix CRC tells them apart."""
    one = session_with_turns(store, 12, "one")
    with store.create("other") as writer:
        for n in range(13):
            complete_turn(writer, f"other-{n}")
        other = writer.session_id
    assert saved(store, one)
    shutil.copyfile(table_of(store, one), table_of(store, other))
    answer = fork_targets(store, other)
    assert answer == replayed(store, other)
    assert [t.turn_id for t in answer.targets] == [f"other-{n}" for n in range(13)]
    assert parsed(store, other) == 13


def test_a_tix_damaged_inside_the_covered_prefix_means_the_table_is_not_used(
    store: SessionStore, session: str
) -> None:
    (piece,) = log_pieces(store.session_dir(session), store.manifest(session))
    tix = piece.path.with_suffix(TURNS_SUFFIX)
    data = bytearray(tix.read_bytes())
    data[40] ^= 0x01  # inside the first record
    tix.write_bytes(bytes(data))
    assert fork_targets(store, session) == replayed(store, session)
    columns = turn_columns(log_pieces(store.session_dir(session), store.manifest(session)))
    assert columns is None or len(columns.turn_ids) < 12  # from the .tix, never the table


def test_a_missing_tix_means_no_answer_from_the_table(store: SessionStore, session: str) -> None:
    (piece,) = log_pieces(store.session_dir(session), store.manifest(session))
    piece.path.with_suffix(TURNS_SUFFIX).unlink()
    assert turn_columns(log_pieces(store.session_dir(session), store.manifest(session))) is None
    assert fork_targets(store, session) == replayed(store, session)


def test_a_forks_table_covers_its_seed_up_to_the_bound_only(store: SessionStore) -> None:
    source = session_with_turns(store, 10, "source")
    child = fork_at(store, source, "t4").child_session_id
    with store.open_writer(child) as writer:
        complete_turn(writer, "own-1")
    with store.open_writer(source) as writer:
        complete_turn(writer, "source-later")  # the seed's .tix grows past the bound
    assert saved(store, child)
    assert parsed(store, child) == 0
    answer = fork_targets(store, child)
    assert answer == replayed(store, child)
    assert [t.turn_id for t in answer.targets] == [*(f"t{n}" for n in range(5)), "own-1"]


def test_rolled_segments_keep_using_the_table_for_the_sealed_ones(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, roll_bytes=600)
    session_id = session_with_turns(store, 8, "rolls")
    assert len(log_pieces(store.session_dir(session_id), store.manifest(session_id))) > 2
    assert saved(store, session_id)
    with store.open_writer(session_id) as writer:
        for n in range(4):
            complete_turn(writer, f"more-{n}")
    assert 0 < parsed(store, session_id) <= 4
    assert fork_targets(store, session_id) == replayed(store, session_id)


def test_a_close_decides_from_the_tables_header_and_the_tix_sizes(
    store: SessionStore, session: str
) -> None:
    path = table_of(store, session)
    before = path.read_bytes()
    with store.open_writer(session) as writer:
        complete_turn(writer, "one-more")
    pieces = log_pieces(store.session_dir(session), store.manifest(session))
    assert not save_turn_table(pieces, min_new_rows=100)  # far too few new bytes
    assert path.read_bytes() == before
    assert save_turn_table(pieces, min_new_rows=1)
    assert parsed(store, session) == 0
    assert fork_targets(store, session) == replayed(store, session)


def test_a_killed_writers_temporary_table_is_swept_by_the_next_write(
    store: SessionStore, session: str
) -> None:
    table = table_of(store, session)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    leftover = table.with_name(f".{TABLE_FILE}.tmp-{int(dead.stdout)}-1")
    leftover.write_bytes(b"half a table")
    mine = table.with_name(f".{TABLE_FILE}.tmp-{os.getpid()}-1")  # a live writer's: kept
    mine.write_bytes(b"being written")
    with store.open_writer(session) as writer:
        complete_turn(writer, "one more")
    assert saved(store, session)
    assert not leftover.exists() and mine.exists()
    assert fork_targets(store, session) == replayed(store, session)


def test_tables_swapped_between_sessions_of_equal_shape_are_not_trusted(tmp_path: Path) -> None:
    """Same turn count, id lengths, segment name and bound: only the ``.tix`` content differs.

    Every ``.tix`` prefix that ends on a record ends with its chained CRC, so the
    CRC32 of such a prefix is the same constant for every table; the key must
    name bytes that differ per session.
    """
    root = tmp_path / "root"
    store = SessionStore(root)
    sessions = {}
    for letter in "ab":
        with store.create(letter) as writer:
            for n in range(12):
                complete_turn(writer, f"{letter}{n:02d}")
            sessions[letter] = writer.session_id
        assert saved(store, sessions[letter])
    one, other = table_of(store, sessions["a"]), table_of(store, sessions["b"])
    tables = one.read_bytes(), other.read_bytes()
    one.write_bytes(tables[1])
    other.write_bytes(tables[0])
    for letter, session_id in sessions.items():
        assert parsed(store, session_id) == 12
        answer = fork_targets(store, session_id)
        assert answer == replayed(store, session_id)
        assert [t.turn_id for t in answer.targets] == [f"{letter}{n:02d}" for n in range(12)]
        _, listed = run_cli(root, "session", "targets", session_id)
        assert [t["turnId"] for t in listed["targets"]] == [f"{letter}{n:02d}" for n in range(12)]
