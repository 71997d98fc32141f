"""Fork engine benchmarks, each measured side by side with its baseline in one run.

    python tests/benchmarks/bench_fork.py [--turns 20000] [--sessions 5000] [--repeat 5]

(a) fork at the last turn of a 20,000-turn (>= 40 MB) log vs. ``shutil.copyfile``
    of that log (and vs. copyfile + fsync, since a fork must be durable);
(b) ``fork_targets`` on a cold session vs. a full cold replay
    (``SessionStore.read``: scan + ``Projection.replay``);
(c) ``tree`` over 5,000 sessions vs. one directory listing plus reading and
    parsing 5,000 manifests.

Each number is the best of ``--repeat`` runs (this measures the code, not
the neighbours on a shared machine).
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

from helpers_fork import write_big_session  # noqa: E402

from branchwise.core.fork import fork  # noqa: E402
from branchwise.core.lineage import tree  # noqa: E402
from branchwise.core.manifest import Manifest, ParentLink  # noqa: E402
from branchwise.core.projection import Projection  # noqa: E402
from branchwise.core.store import SessionStore  # noqa: E402
from branchwise.core.targets import fork_targets  # noqa: E402


def best(repeat: int, call: Callable[[], Any], cleanup: Callable[[Any], Any] | None = None) -> float:
    """Best wall time of ``repeat`` calls, in seconds (``cleanup`` runs untimed after each)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
        if cleanup is not None:
            cleanup(result)
    return min(times)


def row(name: str, ours: float, base: float, base_name: str) -> None:
    print(f"{name:<34} {ours * 1000:9.1f} ms   {base_name:<34} {base * 1000:9.1f} ms"
          f"   ratio {ours / base:6.2f}")


def bench_fork(root: Path, turns: int, repeat: int) -> None:
    store = SessionStore(root / "fork")
    started = time.perf_counter()
    source = write_big_session(store, turns, answer_words=300)
    log = store.session_dir(source) / "events.log"
    size = log.stat().st_size
    print(f"built {turns} turns, {size / 1e6:.1f} MB in {time.perf_counter() - started:.1f} s")
    answer = fork_targets(store, source)
    last = answer.targets[-1]
    assert last.available and last.boundary_sequence is not None
    copy = root / "copy.log"

    def copyfile() -> None:
        shutil.copyfile(log, copy)

    def copyfile_fsync() -> None:
        copyfile()
        fd = os.open(copy, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)

    ops = iter(range(10**6))

    def fork_last() -> str:
        return fork(store, source, last.turn_id, last.boundary_sequence or 0,
                    answer.generation, f"op-{next(ops)}").child_session_id

    # Both sides delete their output between runs, so both reuse freed page-cache pages.
    t_fork = best(repeat, fork_last, lambda child: shutil.rmtree(store.session_dir(child)))
    t_copy = best(repeat, copyfile, lambda _: copy.unlink())
    t_copy_sync = best(repeat, copyfile_fsync, lambda _: copy.unlink())
    print("(a) fork at the last turn")
    row("fork (decode, renumber, fsync)", t_fork, t_copy, "shutil.copyfile")
    row("fork (decode, renumber, fsync)", t_fork, t_copy_sync, "shutil.copyfile + fsync")

    print("(b) fork targets on a cold session")
    t_targets = best(repeat, lambda: fork_targets(store, source))
    t_read = best(max(1, repeat // 2), lambda: store.read(source))
    frames = store.read(source).scan.frames
    t_replay = best(max(1, repeat // 2), lambda: Projection.replay(f.events for f in frames))
    row("fork_targets (cold, whole log)", t_targets, t_read, "SessionStore.read (scan+replay)")
    row("fork_targets (cold, whole log)", t_targets, t_replay, "Projection.replay alone")


def bench_tree(root: Path, sessions: int, repeat: int) -> None:
    store = SessionStore(root / "tree")
    ids = [f"{n:08d}-bench" for n in range(sessions)]
    for n, session_id in enumerate(ids):
        # Every 10th session is a root; the others fork or spawn from an earlier one.
        parent = None if n % 10 == 0 else ParentLink(ids[(n * 7919) % n], "fork", "t", 3, 1)
        manifest = Manifest(session_id, f"s{n}", "fork" if parent else "root", float(n),
                            parent=parent, root_session_id=None)
        directory = store.sessions_dir / session_id
        directory.mkdir()
        (directory / "manifest.json").write_bytes(orjson.dumps(manifest.to_json()))

    def baseline() -> None:
        for name in os.listdir(store.sessions_dir):
            orjson.loads((store.sessions_dir / name / "manifest.json").read_bytes())

    t_tree = best(repeat, lambda: tree(store, ids[0]))
    t_base = best(repeat, baseline)
    size = sum(1 for _ in tree(store, ids[0]).walk())
    print(f"(c) tree over {sessions} sessions ({size} in the measured tree)")
    row("tree (one manifest scan)", t_tree, t_base, "listdir + read/parse manifests")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=20_000)
    parser.add_argument("--sessions", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        bench_fork(Path(tmp), args.turns, args.repeat)
        bench_tree(Path(tmp), args.sessions, args.repeat)


if __name__ == "__main__":
    main()
