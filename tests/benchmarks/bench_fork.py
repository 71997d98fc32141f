"""Fork engine benchmarks, each measured side by side with its baseline in one run.

    python tests/benchmarks/bench_fork.py [--turns 20000] [--sessions 5000] [--repeat 5]

(a) fork at the last turn of a 20,000-turn (>= 40 MB) log vs. ``shutil.copyfile``
    of that log (and vs. copyfile + fsync, since a fork must be durable);
(b) ``fork_targets`` on a cold session vs. a full cold replay
    (``SessionStore.read``: scan + ``Projection.replay``), with a new
    ``TargetsCache`` and with none, and again after one more turn (the
    cache replays only the new frames);
(c) ``tree`` over 5,000 sessions vs. one directory listing plus reading and
    parsing 5,000 manifests.

Each number is the best of ``--repeat`` runs, ours and the baseline
alternating, so load from neighbours on a shared machine hits both alike.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.sessions import complete_turn, log_file, write_big_session

from branchwise.core import ForkRequest, SessionStore, fork, fork_targets, tree
from branchwise.core.fork.targets import TargetsCache
from branchwise.core.projection.projection import Projection
from branchwise.core.store.manifest import Manifest, ParentLink


def side_by_side(
    repeat: int,
    ours: Callable[[], Any],
    base: Callable[[], Any],
    cleanup: Callable[[Any], Any] = lambda _: None,
) -> tuple[float, float]:
    """Best wall times of ``ours`` and ``base``, run alternately so both see the same machine.

    ``cleanup`` gets each call's result and runs untimed.
    """
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for call, kept in ((ours, times[0]), (base, times[1])):
            start = time.perf_counter()
            result = call()
            kept.append(time.perf_counter() - start)
            cleanup(result)
            del result  # free it untimed, not inside the next timed call
    return min(times[0]), min(times[1])


def row(name: str, ours: float, base: float, base_name: str) -> None:
    print(
        f"{name:<34} {ours * 1000:9.1f} ms   {base_name:<34} {base * 1000:9.1f} ms"
        f"   ratio {ours / base:6.2f}"
    )


def bench_fork(root: Path, turns: int, repeat: int) -> None:
    store = SessionStore(root / "fork")
    started = time.perf_counter()
    source = write_big_session(store, turns, answer_words=300)
    log = log_file(store.session_dir(source))
    size = log.stat().st_size
    print(f"built {turns} turns, {size / 1e6:.1f} MB in {time.perf_counter() - started:.1f} s")
    answer = fork_targets(store, source)
    last = answer.targets[-1]
    assert last.available and last.boundary_sequence is not None
    copy = root / "copy.log"

    def copyfile() -> Path:
        shutil.copyfile(log, copy)
        return copy

    def copyfile_fsync() -> Path:
        copyfile()
        fd = os.open(copy, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        return copy

    ops = iter(range(10**6))

    def fork_last() -> Path:
        child = fork(
            store,
            ForkRequest(source, last.turn_id, last.boundary_sequence or 0, answer.generation),
            f"op-{next(ops)}",
        ).child_session_id
        return store.session_dir(child)

    def remove(path: Path) -> None:
        # Both sides delete their output, so both reuse freed page-cache pages.
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()

    print("(a) fork at the last turn")
    t_fork, t_copy = side_by_side(repeat, fork_last, copyfile, remove)
    row("fork (decode, renumber, fsync)", t_fork, t_copy, "shutil.copyfile")
    t_fork, t_copy_sync = side_by_side(repeat, fork_last, copyfile_fsync, remove)
    row("fork (decode, renumber, fsync)", t_fork, t_copy_sync, "shutil.copyfile + fsync")

    plain = write_big_session(store, turns, answer_words=300, usage=False)
    plain_last = fork_targets(store, plain).targets[-1]

    def fork_plain() -> Path:
        child = fork(
            store,
            ForkRequest(plain, plain_last.turn_id, plain_last.boundary_sequence or 0, 1),
            f"op-{next(ops)}",
        ).child_session_id
        return store.session_dir(child)

    t_plain, t_copy_sync = side_by_side(repeat, fork_plain, copyfile_fsync, remove)
    row("fork, log without usage events", t_plain, t_copy_sync, "shutil.copyfile + fsync")

    print("(b) fork targets on a cold session")

    def cold_targets() -> object:
        # A new cache, as for the first query of a session: replay (and checksum) the whole log.
        return fork_targets(store, source, cache=TargetsCache())

    t_targets, t_read = side_by_side(repeat, cold_targets, lambda: store.read(source))
    row("fork_targets, cold", t_targets, t_read, "SessionStore.read (scan+replay)")
    frames = store.read(source).scan.frames
    t_targets, t_replay = side_by_side(
        repeat, cold_targets, lambda: Projection.replay(f.events for f in frames)
    )
    row("fork_targets, cold", t_targets, t_replay, "Projection.replay alone (no I/O)")

    t_uncached, t_read = side_by_side(
        repeat, lambda: fork_targets(store, source), lambda: store.read(source)
    )
    row("fork_targets, no cache (the CLI)", t_uncached, t_read, "SessionStore.read (scan+replay)")

    # What a client of `branchwise serve` does after every turn: ask again once
    # one more turn committed.
    cache = TargetsCache()
    with store.open_writer(source) as writer:
        fork_targets(store, source, cache=cache)
        times = []
        for n in range(repeat):
            complete_turn(writer, f"bench-{n}")
            start = time.perf_counter()
            fork_targets(store, source, cache=cache)
            times.append(time.perf_counter() - start)
    row("fork_targets, again after a turn", min(times), t_read, "SessionStore.read (scan+replay)")


def bench_tree(root: Path, sessions: int, repeat: int) -> None:
    store = SessionStore(root / "tree")
    ids = [f"{n:08d}-bench" for n in range(sessions)]
    for n, session_id in enumerate(ids):
        # Every 10th session is a root; the others fork or spawn from an earlier one.
        parent = None if n % 10 == 0 else ParentLink(ids[(n * 7919) % n], "fork", "t", 3, 1)
        manifest = Manifest(
            session_id,
            f"s{n}",
            "fork" if parent else "root",
            float(n),
            parent=parent,
            root_session_id=None,
        )
        directory = store.sessions_dir / session_id
        directory.mkdir()
        (directory / "manifest.json").write_bytes(orjson.dumps(manifest.to_json()))

    def baseline() -> None:
        for name in os.listdir(store.sessions_dir):
            orjson.loads((store.sessions_dir / name / "manifest.json").read_bytes())

    t_tree, t_base = side_by_side(repeat, lambda: tree(store, ids[0]), baseline)
    size = sum(1 for _ in tree(store, ids[0]).walk())
    print(f"(c) tree over {sessions} sessions ({size} in the measured tree)")
    row("tree (one manifest scan)", t_tree, t_base, "listdir + read/parse manifests")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=20_000)
    parser.add_argument("--sessions", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        bench_fork(Path(tmp), args.turns, args.repeat)
        bench_tree(Path(tmp), args.sessions, args.repeat)


if __name__ == "__main__":
    main()
