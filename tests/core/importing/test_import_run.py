"""Importing into a real store: the trees as sessions, conversation by conversation, and again."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers.chatgpt_export import conversation, linear, message, write_export, write_zip

from branchwise.core.errors import ImportNotFound, UnknownImportFormat
from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import fork_targets
from branchwise.core.importing.run import ImportProgress, ImportReport, import_path
from branchwise.core.lineage import tree
from branchwise.core.store.store import SessionStore
from branchwise.core.store.trash import Trash


def branchy() -> dict[str, Any]:
    """Turn 2 regenerated and edited (the edit calls a tool), and the first prompt edited."""
    return conversation(
        "c-branchy",
        "Branchy",
        [
            ("root", None, None),
            ("sys", "root", message("system", "", hidden=True)),
            ("u1", "sys", message("user", "first", time=1)),
            ("a1", "u1", message("assistant", "ans1", time=2, model="gpt-4o")),
            ("u2", "a1", message("user", "second", time=3)),
            ("a2", "u2", message("assistant", "ans2", time=4, model="gpt-4o")),
            ("a2b", "u2", message("assistant", "ans2 again", time=5, model="o1")),
            ("u2e", "a1", message("user", "second edited", time=6)),
            (
                "c",
                "u2e",
                message(
                    "assistant",
                    content={"content_type": "code", "language": "python", "text": "1+1"},
                    recipient="python",
                    time=7,
                ),
            ),
            (
                "o",
                "c",
                message(
                    "tool",
                    content={"content_type": "execution_output", "text": "2"},
                    name="python",
                    time=8,
                ),
            ),
            ("a2e", "o", message("assistant", "two", time=9, model="gpt-4o")),
            ("u1e", "sys", message("user", "first edited", time=10)),
            ("a1e", "u1e", message("assistant", "other", time=11)),
        ],
        current="a2",
    )


def transcript(store: SessionStore, session_id: str) -> list[tuple[str, str]]:
    snapshot = store.read(session_id)
    return [(m.role, m.content) for m in snapshot.projection.messages]


def by_source(report: ImportReport) -> dict[str, Any]:
    return {c.source_id: c for c in report.conversations}


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "data")


def test_a_branchy_conversation_becomes_a_root_and_its_forks(
    tmp_path: Path, store: SessionStore
) -> None:
    report = import_path(store, write_export(tmp_path / "conversations.json", [branchy()]))
    assert report.format == "chatgpt" and report.skipped == () and report.warnings == ()
    found = by_source(report)
    assert list(found) == ["c-branchy", "c-branchy/a2b", "c-branchy/a2e", "c-branchy/a1e"]
    root = found["c-branchy"]
    assert (root.kind, root.parent_session_id, root.fork_turn_id, root.created) == (
        "root",
        None,
        None,
        True,
    )
    assert transcript(store, root.session_id) == [
        ("user", "first"),
        ("assistant", "ans1"),
        ("user", "second"),
        ("assistant", "ans2"),
    ]
    root_turns = [t.turn_id for t in store.read(root.session_id).projection.turns]
    # the regeneration forks after turn 1 and asks "second" again
    regen = found["c-branchy/a2b"]
    assert (regen.kind, regen.parent_session_id, regen.fork_turn_id) == (
        "fork",
        root.session_id,
        root_turns[0],
    )
    assert transcript(store, regen.session_id) == [
        ("user", "first"),
        ("assistant", "ans1"),
        ("user", "second"),
        ("assistant", "ans2 again"),
    ]
    manifest = store.manifest(regen.session_id)
    assert manifest.parent is not None and manifest.parent.origin is not None
    assert (manifest.parent.origin.kind, manifest.parent.origin.turn_id) == (
        "regenerate",
        root_turns[1],
    )
    assert manifest.seed  # a real fork: the parent's segment linked as its seed
    # the edit forks after turn 1 too, with its tool call and result
    edit = found["c-branchy/a2e"]
    assert edit.fork_turn_id == root_turns[0]
    assert store.manifest(edit.session_id).parent.origin.kind == "edit"  # type: ignore[union-attr]
    assert [role for role, _ in transcript(store, edit.session_id)] == [
        "user",
        "assistant",
        "user",
        "tool",
        "assistant",
    ]
    # the edited first prompt has no earlier turn: a fork at the start, nothing inherited
    start = found["c-branchy/a1e"]
    assert (start.kind, start.fork_turn_id) == ("fork", None)
    assert transcript(store, start.session_id) == [("user", "first edited"), ("assistant", "other")]
    # titles, models and times are kept
    snapshot = store.read(regen.session_id)
    assert store.manifest(root.session_id).title == "Branchy"
    # each branch is named after the conversation it left, as a branch made here is
    fork_titles = sorted(
        store.manifest(c.session_id).title for c in found.values() if c.kind == "fork"
    )
    assert fork_titles == [f"Branchy (branch {n})" for n in range(1, len(fork_titles) + 1)]
    events = [e for frame in snapshot.scan.frames for e in frame.events]
    answer = next(
        e for e in events if e["type"] == "message/assistant" and e["content"] == "ans2 again"
    )
    assert answer["model"] == "o1" and answer["ts"] == 5
    # lineage describes it like any other tree
    node = tree(store, root.session_id)
    assert {c.manifest.session_id for c in node.children} == {
        regen.session_id,
        edit.session_id,
        start.session_id,
    }


def test_every_imported_turn_can_be_branched_again(tmp_path: Path, store: SessionStore) -> None:
    report = import_path(store, write_export(tmp_path / "c.json", [branchy()]))
    for imported in report.conversations:
        targets = fork_targets(store, imported.session_id)
        assert targets.targets and all(t.available for t in targets.targets), imported
    edit = by_source(report)["c-branchy/a2e"].session_id
    last = fork_targets(store, edit).targets[-1]
    made = fork(store, ForkRequest(edit, last.turn_id, last.boundary_sequence, 1), "again")
    assert transcript(store, made.child_session_id) == transcript(store, edit)


def test_reimporting_the_same_file_creates_nothing(tmp_path: Path, store: SessionStore) -> None:
    path = write_zip(tmp_path / "export.zip", [branchy(), linear("c-lin", 3)])
    first = import_path(store, path)
    folders = sorted(os.listdir(store.sessions_dir))
    again = import_path(store, path)
    assert [c.created for c in first.conversations] == [True] * 5
    assert [c.created for c in again.conversations] == [False] * 5
    assert [c.session_id for c in again.conversations] == [
        c.session_id for c in first.conversations
    ]
    assert sorted(os.listdir(store.sessions_dir)) == folders


def test_a_cancelled_import_leaves_whole_conversations_and_a_reimport_adds_the_rest(
    tmp_path: Path, store: SessionStore
) -> None:
    path = write_export(tmp_path / "c.json", [branchy(), linear("c-lin", 2), linear("c-3", 1)])
    cancel = threading.Event()
    seen: list[ImportProgress] = []

    def progress(update: ImportProgress) -> None:
        seen.append(update)
        cancel.set()  # at the first report: after the first tree was read

    report = import_path(store, path, on_progress=progress, cancel=cancel)
    assert report.cancelled and any("cancelled" in w for w in report.warnings)
    assert len(report.conversations) < 6
    # every conversation on disk is reported, and each is whole
    assert len(os.listdir(store.sessions_dir)) == len(report.conversations)
    for imported in report.conversations:
        assert store.read(imported.session_id).projection.turns
    rest = import_path(store, path)
    assert len(rest.conversations) == 6
    made_before = {c.session_id for c in report.conversations}
    assert [c.created for c in rest.conversations] == [
        c.session_id not in made_before for c in rest.conversations
    ]
    assert seen and seen[0].total_bytes == path.stat().st_size


def test_hidden_only_conversations_are_skipped(tmp_path: Path, store: SessionStore) -> None:
    empty = conversation(
        "c-empty", "Empty", [("root", None, None), ("sys", "root", message("system", "x"))]
    )
    report = import_path(store, write_export(tmp_path / "c.json", [empty, linear("ok", 1)]))
    assert [s.reason for s in report.skipped] == ["the conversation has no visible messages"]
    assert [c.source_id for c in report.conversations] == ["ok"]


def test_the_report_is_the_cli_shape(tmp_path: Path, store: SessionStore) -> None:
    report = import_path(
        store, write_export(tmp_path / "c.json", [linear("ok", 1)]), format="chatgpt"
    )
    data = report.to_json()
    assert set(data) == {"conversations", "skipped", "warnings"}
    assert set(data["conversations"][0]) == {
        "sessionId",
        "title",
        "kind",
        "parentSessionId",
        "forkTurnId",
        "source",
        "created",
    }
    assert data["conversations"][0]["source"] == {"format": "chatgpt", "id": "ok"}


def test_unknown_and_missing_inputs_are_typed_errors(tmp_path: Path, store: SessionStore) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    with pytest.raises(UnknownImportFormat):
        import_path(store, other)
    with pytest.raises(UnknownImportFormat):
        import_path(store, other, format="myspace")
    with pytest.raises(ImportNotFound):
        import_path(store, tmp_path / "missing.json")
    assert not store.sessions_dir.exists() or not os.listdir(store.sessions_dir)


def test_a_damaged_chatgpt_mapping_is_repaired_with_warnings(
    tmp_path: Path, store: SessionStore
) -> None:
    damaged = conversation(
        "c-damaged",
        "Damaged",
        [
            ("u1", "gone", message("user", "orphan prompt", time=None)),
            ("a1", "u1", message("assistant", "orphan answer", time=None)),
            ("x1", "x2", message("user", "loop prompt", time=5)),
            ("x2", "x1", message("assistant", "loop answer", time=6)),
        ],
        current="a1",
    )
    report = import_path(store, write_export(tmp_path / "c.json", [damaged]))
    assert [(c.kind, c.fork_turn_id) for c in report.conversations] == [
        ("root", None),
        ("fork", None),
    ]
    assert transcript(store, report.conversations[0].session_id) == [
        ("user", "orphan prompt"),
        ("assistant", "orphan answer"),
    ]
    assert transcript(store, report.conversations[1].session_id) == [
        ("user", "loop prompt"),
        ("assistant", "loop answer"),
    ]
    assert any("missing parent" in w for w in report.warnings)
    assert any("loop" in w for w in report.warnings)


def test_a_conversation_deleted_after_import_is_not_brought_back(
    tmp_path: Path, store: SessionStore
) -> None:
    path = write_export(tmp_path / "c.json", [branchy()])
    first = import_path(store, path)
    root, regen = first.conversations[0].session_id, first.conversations[1].session_id
    Trash(store).trash(root)
    shutil.rmtree(store.session_dir(regen))  # gone for good, as after emptying the Trash
    again = import_path(store, path)
    assert not store.exists(root) and not store.exists(regen)
    assert [c.created for c in again.conversations] == [False, False, False]
    (skip,) = again.skipped
    assert skip.source == "chatgpt:c-branchy/a2b" and "Trash" in skip.reason
