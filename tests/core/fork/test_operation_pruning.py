"""Pruning ``<root>/fork-index/``: old reservations go; young and journalled ones stay."""

from __future__ import annotations

import functools
import multiprocessing
import os
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from helpers.forking import fork_at, make_source, request_for
from helpers.kills import kill_moments, start_forked, time_forked

from branchwise.core.fork import operations
from branchwise.core.fork.operations import (
    RESERVATION_HORIZON,
    ForkRequest,
    OperationIndex,
    PrunedReservation,
)
from branchwise.core.fs.atomic import fsync_dir
from branchwise.core.store.store import SessionStore

NOW = 2_000_000_000.0
DAY = 24 * 3600.0
REQUEST = ForkRequest("source", "turn_0", 4, 1, "child")


def age(path: Path, days: float, now: float = NOW) -> None:
    """Set a file's modification time ``days`` before ``now``."""
    stamp = now - days * DAY
    os.utime(path, (stamp, stamp))


def reserve(
    index: OperationIndex, op: str, days_old: float, child: str = "child", now: float = NOW
) -> Path:
    """A real reservation of ``op``, aged ``days_old`` days before ``now``."""
    index.reserve(op, ForkRequest("source", "turn_0", 4, 1, child))
    path = index._path(op)
    age(path, days_old, now)
    return path


def names(index: OperationIndex) -> set[str]:
    return {p.name for p in index.directory.iterdir()} if index.directory.exists() else set()


def test_the_horizon_is_thirty_days() -> None:
    assert RESERVATION_HORIZON == 30 * DAY


def test_an_old_reservation_whose_child_exists_is_pruned(store: SessionStore) -> None:
    source = make_source(store, turns=1)
    first = fork_at(store, source.session_id, "turn_0", op="op-old")
    index = OperationIndex(store.root)
    path = index._path("op-old")
    age(path, 31, now=time.time())

    pruned = index.prune(time.time())

    assert pruned == (PrunedReservation(path.name, False, "op-old", first.child_session_id),)
    assert not path.exists()
    assert store.manifest(first.child_session_id).session_id == first.child_session_id
    # The documented horizon: a retry this late is a new operation and makes a new child.
    again = fork_at(store, source.session_id, "turn_0", op="op-old")
    assert again.created and again.child_session_id != first.child_session_id


def test_a_late_retry_that_names_its_child_stays_idempotent(store: SessionStore) -> None:
    source = make_source(store, turns=1)
    request = request_for(store, source)
    named = ForkRequest(
        request.source_session_id,
        request.turn_id,
        request.boundary_sequence,
        request.expected_generation,
        "named-child-01",
    )
    from branchwise.core.fork.engine import fork

    first = fork(store, named, "op-named")
    index = OperationIndex(store.root)
    age(index._path("op-named"), 400, now=time.time())
    assert len(index.prune(time.time())) == 1
    again = fork(store, named, "op-named")
    assert again.child_session_id == first.child_session_id and not again.created


def test_an_old_reservation_without_a_child_is_pruned_too(tmp_path: Path) -> None:
    # A crash between reserving and publishing, long ago: a retry now simply forks afresh.
    index = OperationIndex(tmp_path)
    path = reserve(index, "op-abandoned", days_old=45)
    assert [p.operation_id for p in index.prune(NOW)] == ["op-abandoned"]
    assert not path.exists()


def test_a_reservation_younger_than_the_horizon_stays(tmp_path: Path) -> None:
    index = OperationIndex(tmp_path)
    young = reserve(index, "op-young", days_old=29.9)
    future = reserve(index, "op-future", days_old=-3)  # a clock set back: never "old"
    assert index.prune(NOW) == ()
    assert young.exists() and future.exists()


def test_a_reservation_the_journal_names_stays_however_old(tmp_path: Path) -> None:
    index = OperationIndex(tmp_path)
    named = reserve(index, "op-journalled", days_old=900)
    other = reserve(index, "op-other", days_old=900)
    pruned = index.prune(NOW, keep={"op-journalled"})
    assert [p.operation_id for p in pruned] == ["op-other"]
    assert named.exists() and not other.exists()
    assert index.lookup("op-journalled") == ForkRequest("source", "turn_0", 4, 1, "child")


def test_dead_temporary_files_go_and_foreign_files_stay(tmp_path: Path) -> None:
    index = OperationIndex(tmp_path)
    keep_me = reserve(index, "op-1", days_old=1)
    digest = keep_me.name.removesuffix(".json")
    dead_tmp = index.directory / f".{digest}.json.4242-0badcafe"
    live_tmp = index.directory / f".{digest}.json.4243-0badf00d"
    for tmp in (dead_tmp, live_tmp):
        tmp.write_bytes(b'{"operationId": "op-1", "requ')  # a half-written reservation
    age(dead_tmp, 31)
    age(live_tmp, 0.001)
    foreign = index.directory / "notes.txt"
    foreign.write_text("mine")
    age(foreign, 400)
    folder = index.directory / ("f" * 64 + ".json")
    folder.mkdir()
    target = tmp_path / "outside.json"
    target.write_text("{}")
    age(target, 400)
    link = index.directory / ("e" * 64 + ".json")
    link.symlink_to(target)
    os.utime(link, (NOW - 400 * DAY,) * 2, follow_symlinks=False)

    pruned = index.prune(NOW)

    assert pruned == (PrunedReservation(dead_tmp.name, True, None, None),)
    assert names(index) == {keep_me.name, live_tmp.name, foreign.name, folder.name, link.name}
    assert target.read_text() == "{}"


def test_a_damaged_old_reservation_is_pruned_and_reported_as_unknown(tmp_path: Path) -> None:
    index = OperationIndex(tmp_path)
    index.directory.mkdir()
    for n, body in enumerate([b"{torn", b"[1, 2]", b'{"operationId": 7, "request": {}}']):
        path = index._path(f"op-{n}")
        path.write_bytes(body)
        age(path, 31)
    pruned = index.prune(NOW)
    assert sorted(p.name for p in pruned) == sorted(index._path(f"op-{n}").name for n in range(3))
    assert {(p.operation_id, p.child_session_id) for p in pruned} == {(None, None)}
    assert names(index) == set()


def test_no_index_folder_prunes_nothing(tmp_path: Path) -> None:
    assert OperationIndex(tmp_path).prune(NOW) == ()
    assert not (tmp_path / "fork-index").exists()


def test_the_folder_is_fsynced_once_and_only_when_something_went(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[Path] = []
    monkeypatch.setattr(
        operations, "fsync_dir", lambda path: (synced.append(path), fsync_dir(path))
    )
    index = OperationIndex(tmp_path)
    for n in range(5):
        reserve(index, f"op-{n}", days_old=40 if n % 2 else 1)
    synced.clear()
    assert len(index.prune(NOW)) == 2
    assert synced == [index.directory]
    synced.clear()
    assert index.prune(NOW) == ()
    assert synced == []


def test_a_reservation_replaced_while_it_is_judged_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A concurrent ``reserve`` replacing a damaged old file between the scan and the unlink."""
    index = OperationIndex(tmp_path)
    index.directory.mkdir()
    stale = index._path("op-retry")
    stale.write_bytes(b"{torn")
    age(stale, 60)
    describe = operations._describe

    def reserve_meanwhile(name: str, path: Path) -> PrunedReservation:
        found = describe(name, path)
        OperationIndex(tmp_path).reserve("op-retry", REQUEST)  # replaces the damaged file
        return found

    monkeypatch.setattr(operations, "_describe", reserve_meanwhile)
    assert index.prune(NOW) == ()
    assert index.lookup("op-retry") == REQUEST


def _reserve_many(root: str, count: int, started: object) -> None:
    index = OperationIndex(Path(root))
    started.set()  # type: ignore[attr-defined]
    for n in range(count):
        index.reserve(f"fresh-{n}", REQUEST)


def test_reservations_made_while_pruning_runs_all_stay(tmp_path: Path) -> None:
    index = OperationIndex(tmp_path)
    now = time.time()
    old = [reserve(index, f"old-{n}", 31, child=f"c{n}", now=now) for n in range(200)]
    context = multiprocessing.get_context("spawn")
    started = context.Event()
    writer = context.Process(target=_reserve_many, args=(str(tmp_path), 300, started))
    writer.start()
    assert started.wait(60)
    pruned, sweeps = [], 0
    while writer.is_alive() or sweeps == 0:
        pruned += index.prune(time.time())
        sweeps += 1
    writer.join(30)
    assert writer.exitcode == 0
    assert sorted(p.operation_id or "" for p in pruned) == sorted(f"old-{n}" for n in range(200))
    assert not any(path.exists() for path in old)
    assert all(index.lookup(f"fresh-{n}") == REQUEST for n in range(300))


# -- a SIGKILL at any moment of a prune leaves only whole reservations ---------------------------


def _fill(index: OperationIndex, count: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``count`` old reservations (written unsynced: this is setup, not the code under test)."""
    index.directory.parent.mkdir()
    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", lambda fd: None)
        for n in range(count):
            reserve(index, f"op-{n}", days_old=31, child=f"c{n}")
        for op in ("kept-0", "kept-1"):
            reserve(index, op, days_old=31)
        reserve(index, "young", days_old=1)


def _assert_whole(index: OperationIndex) -> int:
    """Every file left parses as the reservation its name promises; returns how many are left."""
    left = 0
    for path in index.directory.iterdir():
        data = orjson.loads(path.read_bytes())
        assert index._path(data["operationId"]) == path
        assert index.lookup(data["operationId"]) is not None
        left += 1
    return left


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="kills a forked pruner")
def test_a_kill_at_any_point_of_pruning_leaves_only_whole_reservations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forked process prunes 200 old reservations and is SIGKILLed at a random moment."""
    rng = random.Random(12)
    count, rounds, mid_prune = 200, 30, 0
    template = OperationIndex(tmp_path / "template")
    _fill(template, count, monkeypatch)

    def copy(name: str) -> OperationIndex:
        index = OperationIndex(tmp_path / name)
        shutil.copytree(template.directory, index.directory)  # copy2: the mtimes come along
        return index

    def pruning(index: OperationIndex) -> Callable[[], None]:
        return functools.partial(index.prune, NOW, keep={"kept-0", "kept-1"})

    took = time_forked([pruning(copy(f"timed-{n}")) for n in range(3)])
    for round_, moment in enumerate(kill_moments(rng, took, rounds)):
        index = copy(f"root-{round_}")
        pruner = start_forked(pruning(index))
        time.sleep(moment)
        pruner.kill()
        left = _assert_whole(index)
        assert 3 <= left <= count + 3  # the kept and the young one are never removed
        assert index.lookup("kept-0") and index.lookup("kept-1") and index.lookup("young")
        mid_prune += 3 < left < count + 3
        index.prune(NOW, keep={"kept-0", "kept-1"})  # the next start finishes the job
        assert _assert_whole(index) == 3
    print(f"{rounds} kills, {mid_prune} mid-prune, 0 torn or lost reservations")
    assert mid_prune >= rounds // 4, f"only {mid_prune} of {rounds} kills landed mid-prune"
