"""Migration of format-1 sessions: same answers before and after, leftovers of a crash redone."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers.forking import fork_at
from helpers.segmented import as_format_1
from helpers.sessions import commits_of, complete_turn, session_with_turns

from branchwise.core.errors import CorruptLog, LeaseHeld
from branchwise.core.fork.targets import fork_targets
from branchwise.core.lineage import lineage
from branchwise.core.log.sidecars import read_index
from branchwise.core.store.manifest import load_manifest, save_manifest
from branchwise.core.store.migrate import MIGRATION_DIR
from branchwise.core.store.publish import replace_log
from branchwise.core.store.store import SessionStore, verify_session


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "root")


def _answers(store: SessionStore, session_id: str) -> tuple[object, ...]:
    snap = store.read(session_id)
    p = snap.projection
    report = verify_session(store, session_id)
    return (
        [(m.message_id, m.role, m.content) for m in p.messages],
        [t.to_json() for t in p.turns],
        (p.input_tokens, p.output_tokens),
        fork_targets(store, session_id).to_json(),
        (report["ok"], report["commits"], report["lastSeq"]),
        lineage(store, session_id).to_json(),
    )


def test_migration_keeps_every_answer_and_the_log_inode(store: SessionStore) -> None:
    parent = session_with_turns(store, 3)
    child = fork_at(store, parent, "t1").child_session_id
    for session_id in (parent, child):
        as_format_1(store, session_id)
    before = {s: _answers(store, s) for s in (parent, child)}
    inode = (store.session_dir(parent) / "events.log").stat().st_ino
    assert store.migrate(parent) is True
    assert store.migrate(parent) is False  # idempotent
    directory = store.session_dir(parent)
    assert not (directory / "events.log").exists()
    assert load_manifest(directory).format == 2
    segment = directory / "log" / "000000000001-000000000001.seg"
    assert segment.stat().st_ino == inode  # linked, not copied
    assert read_index(segment) is not None
    with store.open_writer(child):  # a writer open migrates too
        pass
    assert store.manifest(child).format == 2
    assert {s: _answers(store, s) for s in (parent, child)} == before


def test_a_migration_killed_before_its_manifest_is_redone(store: SessionStore) -> None:
    session_id = session_with_turns(store, 2)
    events = as_format_1(store, session_id)
    directory = store.session_dir(session_id)
    before = _answers(store, session_id)
    # What a crash after the rename to log/ but before the manifest leaves.
    (directory / MIGRATION_DIR).mkdir()
    (directory / "log").mkdir()
    os.link(events, directory / "log" / "000000000001-000000000001.seg")
    (directory / "log" / "junk.idx").write_bytes(b"junk")
    assert _answers(store, session_id) == before  # still format 1 for every reader
    with store.open_writer(session_id) as writer:
        complete_turn(writer, "after")
    assert not (directory / MIGRATION_DIR).exists() and not events.exists()
    assert [t.turn_id for t in store.read(session_id).projection.turns][-1] == "after"
    assert not (directory / "log" / "junk.idx").exists()


def test_a_stray_events_log_after_the_manifest_is_removed(store: SessionStore) -> None:
    session_id = session_with_turns(store, 2)
    directory = store.session_dir(session_id)
    segment = directory / "log" / "000000000001-000000000001.seg"
    os.link(segment, directory / "events.log")  # a crash before the final unlink
    before = _answers(store, session_id)
    with store.open_writer(session_id):
        pass
    assert not (directory / "events.log").exists()
    assert segment.stat().st_nlink == 1
    assert _answers(store, session_id) == before


def test_a_corrupt_format_1_log_is_not_migrated(store: SessionStore) -> None:
    session_id = session_with_turns(store, 3)
    events = as_format_1(store, session_id)
    data = bytearray(events.read_bytes())
    data[40] ^= 0xFF
    events.write_bytes(bytes(data))
    with pytest.raises(CorruptLog):
        store.migrate(session_id)
    assert store.manifest(session_id).format == 1
    assert events.read_bytes() == bytes(data)
    assert not (store.session_dir(session_id) / "log").exists()


def test_a_held_session_is_not_migrated(store: SessionStore) -> None:
    session_id = session_with_turns(store, 1)
    as_format_1(store, session_id)
    other = SessionStore(store.root)
    with other.open_writer(session_id), pytest.raises(LeaseHeld):
        store.migrate(session_id)


def test_a_replace_writes_a_new_log_folder_and_drops_the_old(store: SessionStore) -> None:
    session_id = session_with_turns(store, 3)
    generation = replace_log(store, session_id, commits_of(store, session_id)[:3])
    directory = store.session_dir(session_id)
    manifest = load_manifest(directory)
    assert (generation, manifest.log_dir, manifest.format) == (2, "log-g2", 2)
    assert not (directory / "log").exists()
    assert [t.turn_id for t in store.read(session_id).projection.turns] == ["t0"]
    save_manifest(directory, manifest)
    shutil.copytree(directory / "log-g2", directory / "log")  # a crash's leftover folder
    with store.open_writer(session_id):
        pass
    assert not (directory / "log").exists()
