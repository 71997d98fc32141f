"""The search index's record of merges: which branches were brought back, and into which log."""

from __future__ import annotations

from helpers.forking import fork_at
from helpers.sessions import complete_turn

from branchwise.core.conversation.merge import merge_back
from branchwise.core.search.index import INDEX_NAME, SearchIndex
from branchwise.core.store.store import SessionStore


def _tree(store: SessionStore) -> tuple[str, str]:
    with store.create("Trip plans") as writer:
        complete_turn(writer, "r1", "where to?")
        root = writer.session_id
    child = fork_at(store, root, "r1", op="op-side").child_session_id
    with store.open_writer(child) as writer:
        complete_turn(writer, "c1", "what about Kyoto?")
    return root, child


def test_a_merge_is_recorded_under_the_log_that_holds_it(store: SessionStore) -> None:
    root, child = _tree(store)
    with SearchIndex(store.root) as index:
        index.catch_up_all(store)
        assert index.merges() == ()
        result = merge_back(store, child, None, "Kyoto it is", "note", "op-merge")
        index.catch_up_all(store)
        (merge,) = index.merges()
    assert (merge.child_session_id, merge.into_session_id) == (child, root)
    assert merge.merge_sequence == result.merge_sequence
    assert merge.at > 0
    assert merge.to_json() == {"intoSessionId": root, "mergeSequence": result.merge_sequence}


def test_a_fork_after_the_merge_holds_it_too_under_its_own_id(store: SessionStore) -> None:
    root, child = _tree(store)
    merge_back(store, child, None, "Kyoto it is", "note", "op-merge")
    with store.open_writer(root) as writer:
        complete_turn(writer, "r2", "and then?")
    cousin = fork_at(store, root, "r2", op="op-later").child_session_id
    with SearchIndex(store.root) as index:
        index.catch_up_all(store)
        into = {m.into_session_id for m in index.merges()}
    # The reader decides which concern the branch: only ``root`` is its ancestor.
    assert into == {root, cousin}


def test_deleting_the_index_loses_no_merge(store: SessionStore) -> None:
    _root, child = _tree(store)
    merge_back(store, child, None, "first", "note", "op-1")
    merge_back(store, child, None, "second", "note", "op-2")
    with SearchIndex(store.root) as index:
        index.catch_up_all(store)
        before = index.merges()
    assert len(before) == 2
    (store.root / INDEX_NAME).unlink()
    with SearchIndex(store.root) as index:
        assert index.merges() == ()  # empty until it catches up …
        index.catch_up_all(store)
        assert index.merges() == before  # … then whole again, from the logs


def test_a_trashed_parent_takes_its_merges_along(store: SessionStore) -> None:
    root, child = _tree(store)
    merge_back(store, child, None, "Kyoto it is", "note", "op-merge")
    with SearchIndex(store.root) as index:
        index.catch_up_all(store)
        assert [m.into_session_id for m in index.merges()] == [root]
        index.forget(root)
        assert index.merges() == ()
