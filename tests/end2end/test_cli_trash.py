"""``branchwise session delete|trash|restore|purge`` in real processes, and delete racing fork."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
from helpers.cli import cli_command, run_cli
from helpers.race import HELPER as RACE
from helpers.sessions import HELPER as SESSIONS
from helpers.sessions import session_with_turns

from branchwise.core.store.store import SessionStore, verify_session
from branchwise.core.store.trash import Trash


def _new(root: Path, title: str) -> str:
    _, created = run_cli(root, "session", "new", "--title", title)
    session_id: str = created["sessionId"]
    run_cli(root, "session", "say", session_id, f"About {title}?", "--quiet")
    return session_id


def _listed(root: Path) -> list[str]:
    _, listing = run_cli(root, "session", "list")
    return [s["sessionId"] for s in listing["sessions"]]


def test_delete_list_trash_restore_purge_and_empty(tmp_path: Path) -> None:
    root = tmp_path / "root"
    keep, gone, other = _new(root, "Keep"), _new(root, "Unique zebra words"), _new(root, "Other")

    assert run_cli(root, "session", "delete", gone) == (0, {"trashed": [gone]})
    assert gone not in _listed(root) and keep in _listed(root)
    _, trash = run_cli(root, "session", "trash")
    assert [(s["sessionId"], s["title"], s["kind"]) for s in trash["sessions"]] == [
        (gone, "Unique zebra words", "root")
    ]
    assert set(trash["sessions"][0]) == {
        "sessionId",
        "title",
        "kind",
        "parentSessionId",
        "createdAt",
        "trashedAt",
    }
    _, found = run_cli(root, "search", "zebra")
    assert found["hits"] == []

    assert run_cli(root, "session", "restore", gone) == (0, {"restored": [gone]})
    assert gone in _listed(root)
    _, found = run_cli(root, "search", "zebra")
    assert {hit["sessionId"] for hit in found["hits"]} == {gone}

    run_cli(root, "session", "delete", gone, other)
    assert run_cli(root, "session", "purge", gone) == (0, {"purged": [gone]})
    assert run_cli(root, "session", "trash", "--empty") == (0, {"purged": [other]})
    assert run_cli(root, "session", "trash") == (0, {"sessions": []})
    assert _listed(root) == [keep]


def test_refusals_print_typed_errors_and_move_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    live, trashed = _new(root, "Live"), _new(root, "Trashed")
    run_cli(root, "session", "delete", trashed)

    for args, code in [
        (("delete", "nosuchsession"), "session_not_found"),
        (("delete", trashed), "session_trashed"),
        (("delete", live, trashed), "session_trashed"),  # checked before anything moves
        (("restore", live), "not_trashed"),
        (("purge", live), "not_trashed"),
        (("restore", "nosuchsession"), "session_not_found"),
        (("delete", "../escape"), "invalid_session_id"),
        (("show", trashed), "session_not_found"),
    ]:
        status, answer = run_cli(root, "session", *args, check=False)
        assert status == 1 and answer["error"]["code"] == code, (args, answer)
        assert set(answer["error"]) >= {"code", "message"}
    assert live in _listed(root)
    _, trash = run_cli(root, "session", "trash")
    assert [s["sessionId"] for s in trash["sessions"]] == [trashed]


def test_a_running_conversation_is_refused_with_lease_held(tmp_path: Path) -> None:
    root = tmp_path / "root"
    session_id = _new(root, "Busy")
    holder = subprocess.Popen(
        [sys.executable, str(SESSIONS), "hold", str(root), session_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == "ready"
        status, answer = run_cli(root, "session", "delete", session_id, check=False)
        assert status == 1 and answer["error"]["code"] == "lease_held"
        assert session_id in _listed(root)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()


def test_lineage_and_tree_show_where_a_trashed_parent_was(tmp_path: Path) -> None:
    root = tmp_path / "root"
    parent = _new(root, "Parent")
    _, targets = run_cli(root, "session", "targets", parent)
    _, forked = run_cli(root, "session", "fork", parent, "--turn", targets["targets"][0]["turnId"])
    child = forked["childSessionId"]
    _, found = run_cli(root, "search", "About Parent")
    # Credited to the conversation that wrote it, the branch holding it too.
    assert {(h["sessionId"], tuple(h["alsoIn"])) for h in found["hits"]} == {(parent, (child,))}
    run_cli(root, "session", "delete", parent)
    # The message the branch inherited is still found, in the branch only.
    _, found = run_cli(root, "search", "About Parent")
    assert {(h["sessionId"], tuple(h["alsoIn"])) for h in found["hits"]} == {(child, ())}

    _, line = run_cli(root, "session", "lineage", child)
    assert line["complete"] is False
    assert line["broken"] == {"sessionId": parent, "code": "trashed", "title": "Parent"}
    _, tree = run_cli(root, "session", "tree", child)
    assert tree["sessions"][0]["parentState"] == "trashed"
    assert tree["sessions"][0]["parent"]["sessionId"] == parent
    assert run_cli(root, "session", "verify", child)[1]["ok"]

    run_cli(root, "session", "purge", parent)
    _, tree = run_cli(root, "session", "tree", child)
    assert tree["sessions"][0]["parentState"] == "missing"


def test_deleting_while_another_process_forks_leaves_whole_children_or_source_not_found(
    tmp_path: Path,
) -> None:
    """Real processes: a forker loops on one source while the CLI deletes it.

    Every fork either published a whole child (verified, the source's prefix
    exactly) or refused with ``source_not_found``; nothing half-made remains.
    """
    root = tmp_path / "root"
    store = SessionStore(root)
    refusals = 0
    for _round in range(10):
        source = session_with_turns(store, 150, title="Race")
        boundary = store.read(source).projection.turn("t100")
        assert boundary is not None and boundary.boundary_sequence is not None
        expected = [m.content for m in store.read(source).projection.messages][:202]
        forker = subprocess.Popen(
            [sys.executable, str(RACE), str(root), source, "t100"]
            + [str(boundary.boundary_sequence), "1"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert forker.stdout is not None
        assert forker.stdout.readline().strip() == "ready"
        first = orjson.loads(forker.stdout.readline())
        assert "child" in first
        deleted = subprocess.run(
            [*cli_command(root), "session", "delete", source],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert deleted.returncode == 0, deleted.stdout + deleted.stderr
        lines = [first] + [orjson.loads(line) for line in forker.stdout.read().splitlines()]
        forker.stdout.close()
        assert forker.wait(timeout=60) == 0
        assert lines[-1] == {"refused": "source_not_found"}
        refusals += 1
        children = [line["child"] for line in lines[:-1]]
        for child in children:
            assert verify_session(store, child)["ok"]
            messages = [m.content for m in store.read(child).projection.messages]
            assert messages == expected
        assert Trash(store).contains(source)
        assert not [p for p in store.sessions_dir.iterdir() if p.name.startswith(".")]
    assert refusals == 10


def test_delete_with_branches_takes_the_subtree_and_restore_brings_it_back(
    tmp_path: Path,
) -> None:
    from helpers.family import build_map_family

    root = tmp_path / "root"
    f = build_map_family(SessionStore(root))
    code, answer = run_cli(root, "session", "delete", f.plain, "--with-branches")
    assert code == 0 and answer == {"trashed": [f.nested, f.plain]}
    assert f.plain not in _listed(root) and f.nested not in _listed(root)
    assert f.edit in _listed(root)
    assert run_cli(root, "session", "restore", f.plain, f.nested) == (
        0,
        {"restored": [f.plain, f.nested]},
    )
    assert f.nested in _listed(root)
