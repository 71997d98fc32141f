"""Pruning a conversation with all its branches: all or nothing, and one Undo."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.family import build_map_family
from helpers.sessions import visible_sessions

from branchwise.core.conversation.prune import prune, restore_pruned
from branchwise.core.errors import BranchwiseError
from branchwise.core.store.store import SessionStore
from branchwise.core.store.trash import Trash


def test_a_branch_goes_with_its_branches_and_comes_back_whole(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    f = build_map_family(store)
    before = visible_sessions(store)
    moved = prune(store, f.plain)
    assert moved == [f.nested, f.plain]  # leaves first
    assert visible_sessions(store) == before - {f.plain, f.nested}
    assert restore_pruned(store, moved) == [f.plain, f.nested]  # parents first
    assert visible_sessions(store) == before


def test_the_root_takes_the_whole_family(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    f = build_map_family(store)
    moved = prune(store, f.root)
    assert set(moved) == {f.root, f.plain, f.nested, f.edit, f.regen, f.child, f.damaged}
    assert moved[-1] == f.root
    assert visible_sessions(store) == set()


def test_one_member_being_written_refuses_the_whole_prune(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    f = build_map_family(store)
    before = visible_sessions(store)
    with store.open_writer(f.nested), pytest.raises(BranchwiseError) as info:
        prune(store, f.plain)
    assert info.value.code == "lease_held"
    assert visible_sessions(store) == before
    with pytest.raises(BranchwiseError) as info:
        prune(store, f.edit, busy=frozenset({f.edit}))
    assert info.value.code == "lease_held" and visible_sessions(store) == before


def test_a_failure_part_way_moves_back_what_had_moved(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    f = build_map_family(store)
    before = visible_sessions(store)
    (Trash(store).folder / f.plain).mkdir(parents=True)  # the Trash already holds that id
    with pytest.raises(BranchwiseError) as info:
        prune(store, f.plain)
    assert info.value.code == "session_exists"
    assert visible_sessions(store) == before


def test_a_trashed_or_unknown_one_is_refused(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    f = build_map_family(store)
    for session_id, code in (
        (f.trashed, "session_trashed"),
        ("01a2505c-0000-7000-8000-000000000000", "session_not_found"),
    ):
        with pytest.raises(BranchwiseError) as info:
            prune(store, session_id)
        assert info.value.code == code
