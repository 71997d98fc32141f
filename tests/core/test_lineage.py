"""Child sessions, lineage walks and the one-scan tree."""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest
from helpers.sessions import (
    HELPER,
    commits_of,
    complete_turn,
    session_with_turns,
    visible_sessions,
    write_child_chain,
)

from branchwise.core.errors import BranchwiseError, LeaseHeld, LineageCycle, WrongParentWriter
from branchwise.core.lineage import (
    LineageIndex,
    TreeNode,
    create_child,
    forest,
    lineage,
    tree,
)
from branchwise.core.projection import events as ev
from branchwise.core.store.manifest import Manifest, ParentLink, save_manifest
from branchwise.core.store.store import SessionStore


def _without_position(event: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in event.items() if k not in ("seq", "ts")}


def _manifest_only(store: SessionStore, session_id: str, parent: str | None) -> None:
    """A bare session folder with just a manifest (lineage never reads logs)."""
    directory = store.session_dir(session_id)
    directory.mkdir(exist_ok=True)
    link = ParentLink(parent, "fork", "t0", 3, 1) if parent else None
    save_manifest(
        directory,
        Manifest(session_id, session_id, "fork" if parent else "root", created_at=1.0, parent=link),
    )


def test_child_starts_empty_and_both_logs_hold_the_same_link(store: SessionStore) -> None:
    parent = session_with_turns(store, 2)
    result = create_child(store, parent, {"turnId": "t1"}, "researcher")
    child = result.child_session_id
    parent_link = commits_of(store, parent)[-1]
    child_commits = commits_of(store, child)
    assert [e["type"] for e in parent_link] == ["session/child"]
    assert _without_position(parent_link[0]) == _without_position(child_commits[-1][0])
    assert _without_position(parent_link[0]) == {
        "type": "session/child",
        "parentSessionId": parent,
        "childSessionId": child,
        "rootSessionId": parent,
        "spawnedFrom": {"turnId": "t1"},
    }
    # the stored bytes keep the link's field order (the log's format)
    order = ["type", "parentSessionId", "childSessionId", "rootSessionId", "spawnedFrom"]
    assert list(_without_position(parent_link[0])) == order
    assert list(_without_position(child_commits[-1][0])) == order
    state = store.read(child).projection
    assert state.messages == [] and state.turns == [] and state.title == "researcher"
    assert store.read(parent).projection.children[0]["childSessionId"] == child
    manifest = store.manifest(child)
    assert (manifest.kind, manifest.root_session_id, manifest.title) == (
        "child",
        parent,
        "researcher",
    )
    assert manifest.parent == ParentLink(parent, "child", turn_id="t1")
    assert result.to_json()["spawnedFrom"] == {"turnId": "t1"}
    assert not store.is_being_written(parent)  # the writer it opened is closed again


def test_a_running_parent_passes_its_own_writer(store: SessionStore) -> None:
    with store.create("parent") as writer:
        complete_turn(writer, "t0")
        writer.commit([ev.turn_start("t1"), ev.user_message("u1", "delegate this")])
        writer.commit([{"type": "tool/call", "callId": "c1", "name": "spawn", "args": {}}])
        result = create_child(
            store,
            writer.session_id,
            {"turnId": "t1", "toolCallId": "c1"},
            "specialist",
            parent_writer=writer,
        )
        assert writer.projection.open_turn is not None  # the running turn keeps running
        assert writer.projection.children[-1]["spawnedFrom"] == {"turnId": "t1", "toolCallId": "c1"}
        writer.commit([{"type": "tool/result", "callId": "c1", "output": "spawned"}])
    assert store.manifest(result.child_session_id).root_session_id == writer.session_id


def test_a_parent_written_by_another_process_refuses_and_creates_nothing(
    store: SessionStore,
) -> None:
    parent = session_with_turns(store, 1)
    before = visible_sessions(store)
    with subprocess.Popen(
        [sys.executable, str(HELPER), "hold", str(store.root), parent],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        with pytest.raises(LeaseHeld):
            create_child(store, parent, {"turnId": "t0"}, "blocked")
        holder.communicate("")
    assert visible_sessions(store) == before
    create_child(store, parent, {"turnId": "t0"}, "after the writer left")


def test_bad_child_requests_are_typed_and_create_nothing(store: SessionStore) -> None:
    parent = session_with_turns(store, 1)
    other = session_with_turns(store, 1)
    before = visible_sessions(store)
    cases = [
        ("unknown_turn", lambda: create_child(store, parent, {"turnId": "nope"}, "x")),
        ("duplicate_child", lambda: create_child(store, parent, None, "x", child_id=other)),
        ("invalid_spawned_from", lambda: create_child(store, parent, {"where": 1}, "x")),
        ("session_not_found", lambda: create_child(store, "0000000000-gone", None, "x")),
    ]
    for code, call in cases:
        with pytest.raises(BranchwiseError) as caught:
            call()
        assert caught.value.code == code
    with store.open_writer(other) as wrong, pytest.raises(WrongParentWriter):
        create_child(store, parent, None, "x", parent_writer=wrong)
    assert visible_sessions(store) == before


def test_lineage_walks_forks_and_children_to_the_root(store: SessionStore) -> None:
    from branchwise.core.fork.engine import fork
    from branchwise.core.fork.operations import ForkRequest
    from branchwise.core.fork.targets import fork_targets

    root = session_with_turns(store, 2)
    target = fork_targets(store, root).targets[0]
    forked = fork(
        store, ForkRequest(root, "t0", target.boundary_sequence or 0, 1), "op-1"
    ).child_session_id
    child = create_child(store, forked, {"turnId": "t0"}, "helper").child_session_id
    walked = lineage(store, child)
    assert [m.session_id for m in walked.chain] == [child, forked, root]
    assert walked.root_session_id == root and walked.broken is None
    answer = orjson.loads(orjson.dumps(walked.to_json()))
    assert answer["complete"] and [e["kind"] for e in answer["lineage"]] == [
        "child",
        "fork",
        "root",
    ]
    assert lineage(store, root).chain[0].session_id == root


@pytest.mark.parametrize(
    "loop", [["aaaaaaaa-1", "aaaaaaaa-1"], ["aaaaaaaa-1", "aaaaaaaa-2", "aaaaaaaa-3", "aaaaaaaa-1"]]
)
def test_a_lineage_loop_in_damaged_manifests_is_a_typed_error(
    store: SessionStore, loop: list[str]
) -> None:
    for session_id, parent in zip(loop, loop[1:], strict=False):
        _manifest_only(store, session_id, parent)
    _manifest_only(store, "aaaaaaaa-leaf", loop[0])
    with pytest.raises(LineageCycle) as caught:
        lineage(store, "aaaaaaaa-leaf")
    assert caught.value.code == "lineage_cycle"
    assert caught.value.details["cycle"][-1] == loop[0]
    # The tree and the forest stop too, and hide nobody.
    assert {n.manifest.session_id for n, _ in tree(store, loop[0]).walk()} >= set(loop)
    everyone = {n.manifest.session_id for t in forest(store) for n, _ in t.walk()}
    assert everyone == {*loop, "aaaaaaaa-leaf"}


def test_a_missing_ancestor_ends_the_walk_as_broken(store: SessionStore) -> None:
    _manifest_only(store, "bbbbbbbb-child", "bbbbbbbb-gone")
    walked = lineage(store, "bbbbbbbb-child")
    assert walked.broken == {"sessionId": "bbbbbbbb-gone", "code": "session_not_found"}
    assert walked.root_session_id is None and walked.to_json()["complete"] is False


def test_tree_holds_forks_and_children_from_one_scan(store: SessionStore) -> None:
    _manifest_only(store, "cccccccc-root", None)
    for session_id, parent in [
        ("cccccccc-f1", "cccccccc-root"),
        ("cccccccc-f2", "cccccccc-root"),
        ("cccccccc-f1a", "cccccccc-f1"),
        ("cccccccc-f1a1", "cccccccc-f1a"),
        ("cccccccc-other", None),
    ]:
        _manifest_only(store, session_id, parent)
    (store.sessions_dir / "cccccccc-broken").mkdir()
    (store.sessions_dir / "cccccccc-broken" / "manifest.json").write_text("{not json")
    top = tree(store, "cccccccc-root")
    assert [(n.manifest.session_id, depth) for n, depth in top.walk()] == [
        ("cccccccc-root", 0),
        ("cccccccc-f1", 1),
        ("cccccccc-f1a", 2),
        ("cccccccc-f1a1", 3),
        ("cccccccc-f2", 1),
    ]
    flat = top.to_json()
    assert flat["rootSessionId"] == "cccccccc-root"
    assert flat["sessions"][0]["childSessionIds"] == ["cccccccc-f1", "cccccccc-f2"]
    assert [s["sessionId"] for s in tree(store, "cccccccc-f1").to_json()["sessions"]] == [
        "cccccccc-f1",
        "cccccccc-f1a",
        "cccccccc-f1a1",
    ]
    roots = [t.manifest.session_id for t in forest(store)]
    assert sorted(roots) == ["cccccccc-other", "cccccccc-root"]
    with pytest.raises(BranchwiseError) as caught:
        tree(store, "cccccccc-broken")
    assert caught.value.code == "invalid_manifest"


def test_a_very_deep_fork_chain_walks_and_serializes(store: SessionStore) -> None:
    ids = [f"dddddddd-{n:05d}" for n in range(600)]
    _manifest_only(store, ids[0], None)
    for parent, session_id in zip(ids, ids[1:], strict=False):
        _manifest_only(store, session_id, parent)
    assert len(lineage(store, ids[-1]).chain) == 600
    flat = orjson.loads(orjson.dumps(tree(store, ids[0]).to_json()))
    assert [s["depth"] for s in flat["sessions"]] == list(range(600))


def test_forest_tree_and_index_handle_a_chain_thousands_deep(store: SessionStore) -> None:
    ids = write_child_chain(store, 2_500)
    # Deeper than the interpreter's recursion limit: nothing may recurse per level.
    assert len(ids) > sys.getrecursionlimit()
    (top,) = forest(store)
    assert [n.manifest.session_id for n, _ in top.walk()] == ids
    assert [depth for _, depth in tree(store, ids[0]).walk()] == list(range(2_500))
    index = LineageIndex.build(store.iter_manifests())
    (sidebar_top,) = index.forest()
    deepest, depth = list(sidebar_top.walk())[-1]
    assert (deepest.manifest.session_id, depth) == (ids[-1], 2_499)
    assert deepest.manifest.title == "level 2499" and deepest.children == ()


def test_the_index_and_the_store_grow_the_same_forest(store: SessionStore) -> None:
    for session_id, parent, created in [
        ("eeeeeeee-root", None, 1.0),
        ("eeeeeeee-new1", None, 9.0),
        ("eeeeeeee-f1", "eeeeeeee-root", 2.0),
        ("eeeeeeee-f2", "eeeeeeee-root", 3.0),
        ("eeeeeeee-f2a", "eeeeeeee-f2", 4.0),
        ("eeeeeeee-orph", "eeeeeeee-gone", 5.0),
        ("eeeeeeee-lp1", "eeeeeeee-lp2", 6.0),
        ("eeeeeeee-lp2", "eeeeeeee-lp1", 7.0),
    ]:
        _manifest_only(store, session_id, parent)
        path = store.session_dir(session_id) / "manifest.json"
        data = orjson.loads(path.read_bytes())
        path.write_bytes(orjson.dumps({**data, "createdAt": created}))

    def shape(trees: list[TreeNode]) -> list[tuple[str, int]]:
        return [(n.manifest.session_id[9:], d) for t in trees for n, d in t.walk()]

    oldest_first = [
        ("root", 0),
        ("f1", 1),
        ("f2", 1),
        ("f2a", 2),
        ("orph", 0),
        ("new1", 0),
        ("lp1", 0),  # a loop hangs under its first member, after the real tops
        ("lp2", 1),
    ]
    assert shape(forest(store)) == oldest_first
    index = LineageIndex.build(store.iter_manifests())
    assert shape(index.forest(newest_first=False)) == oldest_first
    assert shape(index.forest()) == [
        ("new1", 0),
        ("orph", 0),
        ("root", 0),
        ("f2", 1),
        ("f2a", 2),
        ("f1", 1),
        ("lp2", 0),
        ("lp1", 1),
    ]
    # A put keeps siblings in creation order, whatever order they arrive in.
    late = Manifest("eeeeeeee-f0", "f0", "fork", 1.5, parent=ParentLink("eeeeeeee-root", "fork"))
    index.put(late)
    index.put(late.with_changes(title="renamed"))
    assert [m.title for m in index.children("eeeeeeee-root")] == [
        "eeeeeeee-f2",
        "eeeeeeee-f1",
        "renamed",
    ]


def test_an_empty_child_id_is_refused_not_generated(store: SessionStore) -> None:
    parent = session_with_turns(store, 1)
    before = commits_of(store, parent)
    with pytest.raises(BranchwiseError) as info:
        create_child(store, parent, {"turnId": "t0"}, "side", child_id="")
    assert info.value.code == "invalid_session_id"
    assert visible_sessions(store) == {parent}
    assert commits_of(store, parent) == before  # no link written into the parent
