"""Forks by hard link: seeds bounded at the cut, the copy fallback, forks of forks, deletions."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from helpers.forking import fork_at
from helpers.segmented import as_format_1
from helpers.sessions import commits_of, complete_turn, log_file, session_with_turns

from branchwise.core.fork import engine
from branchwise.core.fork.seeding import plan_from_index
from branchwise.core.fork.targets import fork_targets
from branchwise.core.log.segments import log_pieces
from branchwise.core.log.sidecars import SIDECAR_SUFFIXES, IndexRecord
from branchwise.core.store.store import SessionStore, verify_session
from branchwise.core.store.trash import Trash


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "root")


def _turns(store: SessionStore, session_id: str) -> list[str]:
    return [t.turn_id for t in store.read(session_id).projection.turns]


def _files(store: SessionStore, session_id: str) -> list[Path]:
    return [p.path for p in log_pieces(store.session_dir(session_id), store.manifest(session_id))]


def _refuse_seed_links(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    """Make the file system refuse hard links of seeds (as FAT/exFAT or another device would)."""
    real_link = os.link

    def link(src: str | Path, dst: str | Path, **kwargs: bool) -> None:
        if "/log/seed-" in str(dst):
            raise OSError(code, os.strerror(code))
        real_link(src, dst, **kwargs)

    monkeypatch.setattr(os, "link", link)


class _ReplayCounter:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = engine._replay_to

        def counted(*args: object) -> object:
            self.calls += 1
            return real(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(engine, "_replay_to", counted)


def test_a_fork_links_the_parents_segment_as_a_bounded_seed(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = session_with_turns(store, 4)
    replays = _ReplayCounter(monkeypatch)
    child = fork_at(store, parent, "t1").child_session_id
    assert replays.calls == 0  # the turn index answered; nothing was replayed
    (segment,) = _files(store, parent)
    seed, own = _files(store, child)
    assert seed.name == "seed-000.seg" and seed.stat().st_ino == segment.stat().st_ino
    manifest = store.manifest(child)
    boundary = manifest.parent.boundary_sequence  # type: ignore[union-attr]
    assert manifest.seed_length == boundary and manifest.seed[0].end < segment.stat().st_size
    assert own.name == f"{manifest.seed[0].end_commit + 1:012d}-{boundary + 1:012d}.seg"
    assert _turns(store, child) == ["t0", "t1"]
    # The parent's later appends never appear in the child.
    with store.open_writer(parent) as writer:
        complete_turn(writer, "later")
    assert _turns(store, child) == ["t0", "t1"]
    with store.open_writer(child) as writer:
        complete_turn(writer, "mine", tokens=3)
    assert _turns(store, child) == ["t0", "t1", "mine"]
    assert _turns(store, parent) == ["t0", "t1", "t2", "t3", "later"]
    assert store.read(child).projection.input_tokens == 3
    assert verify_session(store, child)["ok"]


def test_a_refused_link_falls_back_to_a_durable_copy(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = session_with_turns(store, 3)
    _refuse_seed_links(monkeypatch, errno.EXDEV)
    child = fork_at(store, parent, "t1").child_session_id
    monkeypatch.undo()
    (segment,) = _files(store, parent)
    seed = _files(store, child)[0]
    end = store.manifest(child).seed[0].end
    assert seed.stat().st_nlink == 1 and seed.stat().st_ino != segment.stat().st_ino
    assert seed.read_bytes() == segment.read_bytes()[:end]  # only the bounded prefix
    assert _turns(store, child) == ["t0", "t1"] and verify_session(store, child)["ok"]
    grandchild = fork_at(store, child, "t0", op="op-2").child_session_id
    assert _turns(store, grandchild) == ["t0"]


@pytest.mark.parametrize("code", [errno.EMLINK, errno.EPERM, errno.ENOTSUP])
def test_every_refused_link_errno_copies(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    parent = session_with_turns(store, 2)
    _refuse_seed_links(monkeypatch, code)
    child = fork_at(store, parent, "t0").child_session_id
    assert _turns(store, child) == ["t0"]


def test_forks_of_forks_keep_their_seeds_bounds(store: SessionStore) -> None:
    root = session_with_turns(store, 3)
    child = fork_at(store, root, "t1").child_session_id
    with store.open_writer(child) as writer:
        complete_turn(writer, "c0")
        complete_turn(writer, "c1")
    grandchild = fork_at(store, child, "c0", op="op-2").child_session_id
    manifest = store.manifest(grandchild)
    assert [s.file for s in manifest.seed] == ["seed-000.seg", "seed-001.seg"]
    assert manifest.seed[0] == store.manifest(child).seed[0].__class__(
        "seed-000.seg", *list(store.manifest(child).seed[0].to_json().values())[1:]
    )
    assert _turns(store, grandchild) == ["t0", "t1", "c0"]
    root_segment = _files(store, root)[0]
    assert _files(store, grandchild)[0].stat().st_ino == root_segment.stat().st_ino
    assert root_segment.stat().st_nlink == 3


def test_a_child_and_grandchild_survive_deleting_parent_and_grandparent(
    store: SessionStore,
) -> None:
    root = session_with_turns(store, 3)
    child = fork_at(store, root, "t2").child_session_id
    with store.open_writer(child) as writer:
        complete_turn(writer, "c0")
    grandchild = fork_at(store, child, "c0", op="op-2").child_session_id
    before = {s: (_turns(store, s), commits_of(store, s)) for s in (child, grandchild)}
    trash = Trash(store)
    for doomed in (root, child):
        trash.trash(doomed)
        trash.purge(doomed)
    assert not store.exists(root) and not store.exists(child)
    assert {grandchild: (_turns(store, grandchild), commits_of(store, grandchild))} == {
        grandchild: before[grandchild]
    }
    assert verify_session(store, grandchild)["ok"]
    with store.open_writer(grandchild) as writer:
        complete_turn(writer, "g0")
    assert _turns(store, grandchild) == [*before[grandchild][0], "g0"]


def test_a_shared_torn_tail_is_broken_off_without_touching_any_child(
    store: SessionStore,
) -> None:
    parent = session_with_turns(store, 3)
    children = [fork_at(store, parent, t, op=f"op-{t}").child_session_id for t in ("t0", "t2")]
    segment = log_file(store.session_dir(parent))
    with segment.open("ab") as handle:
        handle.write(b"\xffBW\x01torn")  # a crash in the middle of the parent's next commit
    seeds = [_files(store, c)[0] for c in children]
    shared = seeds[0].read_bytes()
    views = {c: commits_of(store, c) for c in children}
    with store.open_writer(parent) as writer:
        assert writer.cut_tail is not None
        complete_turn(writer, "after")
    assert segment.stat().st_ino != seeds[0].stat().st_ino  # broken off
    assert seeds[0].read_bytes() == shared and seeds[0].stat().st_ino == seeds[1].stat().st_ino
    assert {c: commits_of(store, c) for c in children} == views
    assert all(verify_session(store, c)["ok"] for c in children)
    assert _turns(store, parent) == ["t0", "t1", "t2", "after"]


def test_a_cold_unmigrated_source_links_its_events_log(store: SessionStore) -> None:
    parent = session_with_turns(store, 3)
    events = as_format_1(store, parent)
    child = fork_at(store, parent, "t1").child_session_id
    seed = _files(store, child)[0]
    assert seed.stat().st_ino == events.stat().st_ino
    assert store.manifest(parent).format == 1  # the source is never written
    assert _turns(store, child) == ["t0", "t1"]


@pytest.mark.parametrize("damage", ["missing", "garbage"])
def test_without_a_usable_index_the_fork_replays_to_the_same_child(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    parent = session_with_turns(store, 3)
    index = log_file(store.session_dir(parent)).with_suffix(".idx")
    if damage == "missing":
        index.unlink()
    else:
        index.write_bytes(b"BWIX" + b"\x00" * 100)
    replays = _ReplayCounter(monkeypatch)
    child = fork_at(store, parent, "t1").child_session_id
    assert replays.calls == 1
    assert _turns(store, child) == ["t0", "t1"] and verify_session(store, child)["ok"]


def test_a_fork_early_in_a_rolled_session_links_only_what_it_needs(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root", roll_bytes=1500)
    parent = session_with_turns(store, 20)
    segments = _files(store, parent)
    assert len(segments) > 4
    child = fork_at(store, parent, "t1").child_session_id
    seeds = [p for p in _files(store, child) if p.name.startswith("seed-")]
    assert len(seeds) < len(segments) // 2
    assert _turns(store, child) == ["t0", "t1"]
    late = fork_at(store, parent, "t18", op="op-2").child_session_id
    assert _turns(store, late) == [f"t{n}" for n in range(19)]
    assert fork_targets(store, late).targets[-1].turn_id == "t18"


def test_a_forks_own_segment_has_the_sidecars_its_writer_would_build(
    store: SessionStore,
) -> None:
    """Opening the child's tab then rewrites (and fsyncs) none of them."""
    parent = session_with_turns(store, 3)
    child = fork_at(store, parent, "t1").child_session_id
    own = _files(store, child)[-1]
    sidecars = [own.with_suffix(suffix) for suffix in SIDECAR_SUFFIXES]
    published = [(path.stat().st_ino, path.read_bytes()) for path in sidecars]
    with store.open_writer(child):
        assert [(p.stat().st_ino, p.read_bytes()) for p in sidecars] == published
    assert _turns(store, child) == ["t0", "t1"] and verify_session(store, child)["ok"]


def test_a_plan_read_from_the_turn_index_needs_no_fsync_of_its_bound(
    store: SessionStore,
) -> None:
    """The ``.idx`` record is written only after its frame's fsync: it vouches for the bound."""
    parent = session_with_turns(store, 3)
    directory = store.session_dir(parent)
    turn = store.read(parent).projection.turns[1]
    boundary = turn.boundary_sequence
    assert boundary is not None
    plan = plan_from_index(directory, store.manifest(parent), boundary, turn.turn_id)
    assert plan is not None and plan.bound_durable


def test_a_fork_reads_one_index_record_per_sealed_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sealed segment's bound is its seal record, found by the index's size: the fork reads
    that record and not the turns before it, so its cost does not grow with long answers."""
    store = SessionStore(tmp_path / "root", roll_bytes=6000)
    parent = session_with_turns(store, 60)
    segments = _files(store, parent)
    assert len(segments) >= 4
    reads = 0
    real = IndexRecord.from_bytes.__func__  # type: ignore[attr-defined]

    def counted(cls: type[IndexRecord], data: bytes, offset: int = 0) -> IndexRecord | None:
        nonlocal reads
        reads += 1
        return real(cls, data, offset)  # type: ignore[no-any-return]

    monkeypatch.setattr(IndexRecord, "from_bytes", classmethod(counted))
    child = fork_at(store, parent, "t59").child_session_id
    monkeypatch.undo()
    # one seal per sealed segment, and a binary search of the last segment's index
    assert reads <= len(segments) + 8, reads
    assert _turns(store, child) == [f"t{n}" for n in range(60)]
    assert verify_session(store, child)["ok"]
