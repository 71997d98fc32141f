"""Segmented-log benchmarks (issue 11), each ratio measured side by side in one run.

    python tests/benchmarks/bench_segments.py [--big 80000] [--small 1000] [--mid 20000]
        [--disk-turns 25000] [--long 80000] [--repeat 5] [--only fg]

(a) fork at the last turn of ``--big`` turns / of ``--small`` turns (target <= 1.5),
    and / creating an empty session (<= 3);
(b) fork at the last turn of ``--mid`` turns / copying that session's files + fsync (<= 0.2);
(c) fork at turn 1,000 of ``--big`` turns / fork at the last turn of ``--small`` (<= 1.5);
(d) disk used by a ~50 MB session and ten forks of it at its last turn / the session
    alone (<= 1.1; allocated blocks of distinct inodes);
(e) replay (``SessionStore.read``) of a segmented session (16 MiB segments) / the
    same commits in one ``events.log`` (<= 1.05);
(f) a turn's commits with sidecars / without (<= 1.05);
(g) cold ``fork_targets`` of ``--big`` turns / a full replay (<= 0.1);
(h) ``branchwise session fork`` as a process / ``branchwise session lineage`` (<= 1.2);
(i) long answers in many sealed segments: ``--long`` turns of 300-word answers (80,000:
    about 245 MB, 15 segments of 16 MiB, every one but the last sealed as a writer's roll
    leaves it), fork at its last turn / at the last turn of ``--small`` turns (<= 1.5),
    and / copying its files + fsync (<= 0.2).

Each number is the best of ``--repeat`` runs, ours and the baseline alternating.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import report  # noqa: E402
from helpers.segmented import as_format_1  # noqa: E402
from helpers.sessions import complete_turn, write_big_session  # noqa: E402

from branchwise.core.fork.engine import fork  # noqa: E402
from branchwise.core.fork.operations import ForkRequest  # noqa: E402
from branchwise.core.fork.targets import fork_targets  # noqa: E402
from branchwise.core.log.segments import ROLL_BYTES, log_pieces  # noqa: E402
from branchwise.core.log.turn_table import TABLE_FILE, save_turn_table  # noqa: E402
from branchwise.core.store.store import SessionStore  # noqa: E402


def side_by_side(
    repeat: int,
    ours: Callable[[], Any],
    base: Callable[[], Any],
    cleanup: Callable[[Any], Any] = lambda _: None,
) -> tuple[float, float]:
    """Best wall times of ``ours`` and ``base``, alternating; ``cleanup`` runs untimed."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for call, kept in ((ours, times[0]), (base, times[1])):
            start = time.perf_counter()
            result = call()
            kept.append(time.perf_counter() - start)
            cleanup(result)
    return min(times[0]), min(times[1])


class Forker:
    """Forks of one source at one turn, each with a fresh operation id."""

    def __init__(self, store: SessionStore, source: str, turn_index: int = -1) -> None:
        self.store, self.source = store, source
        answer = fork_targets(store, source)
        target = answer.targets[turn_index]
        assert target.available and target.boundary_sequence is not None
        self.request = ForkRequest(
            source, target.turn_id, target.boundary_sequence, answer.generation
        )
        self.count = 0

    def __call__(self) -> str:
        self.count += 1
        op = f"bench-{self.source}-{self.request.turn_id}-{self.count}"
        return fork(self.store, self.request, op).child_session_id


def removing(store: SessionStore) -> Callable[[Any], None]:
    def remove(result: Any) -> None:
        path = store.session_dir(result) if isinstance(result, str) else result
        shutil.rmtree(path, ignore_errors=True)

    return remove


def blocks(paths: list[Path]) -> int:
    """Allocated bytes of the distinct inodes under ``paths`` (a hard link counts once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for top in paths:
        for path in [top, *top.rglob("*")]:
            status = path.lstat()
            key = (status.st_dev, status.st_ino)
            if key in seen:
                continue
            seen.add(key)
            total += status.st_blocks * 512
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--big", type=int, default=80_000)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--mid", type=int, default=20_000)
    parser.add_argument("--disk-turns", type=int, default=25_000)
    parser.add_argument("--long", type=int, default=80_000, help="turns of part (i)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--roll-bytes", type=int, default=ROLL_BYTES)
    parser.add_argument("--only", default="abcdefghi", help="the parts to run, e.g. fg")
    args = parser.parse_args()
    repeat = args.repeat
    parts = set(args.only)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        root = Path(tmp)
        store = SessionStore(root / "data", roll_bytes=args.roll_bytes)
        started = time.perf_counter()
        big = write_big_session(store, args.big, answer_words=40) if parts - {"i"} else None
        small = write_big_session(store, args.small, answer_words=40)
        built = f"{args.big} + {args.small}" if big is not None else f"{args.small}"
        print(f"built {built} turns in {time.perf_counter() - started:.1f} s")
        # The sessions are written as frames, not by a writer: leave the turn table a
        # writer's close leaves (it writes one when 1,024 or more turns are not in it).
        for session_id in (big, small):
            if session_id is None:
                continue
            save_turn_table(log_pieces(store.session_dir(session_id), store.manifest(session_id)))
        remove = removing(store)

        fork_small = Forker(store, small)
        if "i" in parts:
            _part_i(args, root, store, fork_small)
        if big is None:
            return
        if "a" in parts:
            fork_big = Forker(store, big)
            t_big, t_small = side_by_side(repeat, fork_big, fork_small, remove)
            report(f"(a) fork at last of {args.big} / of {args.small}", t_big, t_small, 1.5)

        def create_empty() -> str:
            with store.create("empty") as writer:
                return writer.session_id

        if "a" in parts:
            t_small, t_empty = side_by_side(repeat, fork_small, create_empty, remove)
            report(f"(a) fork at last of {args.small} / new session", t_small, t_empty, 3.0)
        if parts & set("bcde"):
            _parts_b_to_e(args, root, store, big, fork_small, parts)
        if "f" in parts:
            _part_f(store, small, repeat)
        if "g" in parts:
            t_targets, t_replay = side_by_side(
                repeat, lambda: fork_targets(store, big), lambda: store.read(big)
            )
            report(f"(g) cold fork_targets of {args.big} / full replay", t_targets, t_replay, 0.1)
            table = store.session_dir(big) / store.manifest(big).log_dir / TABLE_FILE

            def targets_without_table() -> None:
                if not table.exists():  # fewer than 1,024 turns: a close leaves none
                    fork_targets(store, big)
                    return
                table.rename(table.with_name("aside"))
                try:
                    fork_targets(store, big)
                finally:
                    table.with_name("aside").rename(table)

            t_bare, t_replay = side_by_side(repeat, targets_without_table, lambda: store.read(big))
            report("(g') the same without the turn table / full replay", t_bare, t_replay, 0.1)
        if "h" in parts:
            _part_h(store, small, fork_small, repeat)


def _parts_b_to_e(
    args: argparse.Namespace,
    root: Path,
    store: SessionStore,
    big: str,
    fork_small: Forker,
    parts: set[str],
) -> None:
    repeat, remove = args.repeat, removing(store)
    if parts & set("bc"):
        mid = write_big_session(store, args.mid, answer_words=300)
        mid_files = [p.path for p in log_pieces(store.session_dir(mid), store.manifest(mid))]
        size = sum(p.stat().st_size for p in mid_files)
        copy_fsync = copying_with_fsync(mid_files, root / "copies")
        fork_mid = Forker(store, mid)
        t_mid, t_copy = side_by_side(repeat, fork_mid, copy_fsync, remove)
        report(
            f"(b) fork at last of {args.mid} ({size / 1e6:.0f} MB) / copy+fsync", t_mid, t_copy, 0.2
        )

        fork_early = Forker(store, big, turn_index=min(999, args.big // 2))
        t_early, t_small = side_by_side(repeat, fork_early, fork_small, remove)
        report(f"(c) fork at turn 1000 of {args.big} / last of {args.small}", t_early, t_small, 1.5)

    if "d" in parts:
        disk_root = SessionStore(root / "disk")
        heavy = write_big_session(disk_root, args.disk_turns, answer_words=300)
        alone = blocks([disk_root.session_dir(heavy)])
        forker = Forker(disk_root, heavy)
        children = [forker() for _ in range(10)]
        together = blocks([disk_root.session_dir(s) for s in (heavy, *children)])
        print(
            f"(d) disk: session {alone / 1e6:.1f} MB, with ten forks {together / 1e6:.1f} MB, "
            f"ratio {together / alone:.3f} (target <= 1.1)"
            f"  {'ok' if together / alone <= 1.1 else 'OVER TARGET'}"
        )

    if "e" in parts:
        # (e) the same commits in 16 MiB segments and in one events.log.
        seg_store = SessionStore(root / "seg", roll_bytes=args.roll_bytes)
        one_store = SessionStore(root / "one")
        segmented = write_big_session(seg_store, args.mid, answer_words=300)
        pieces = log_pieces(seg_store.session_dir(segmented), seg_store.manifest(segmented))
        if len(pieces) == 1:  # split the one segment at 16 MiB by reopening it as a writer
            _resegment(seg_store, segmented, args.roll_bytes)
            pieces = log_pieces(seg_store.session_dir(segmented), seg_store.manifest(segmented))
        single = write_big_session(one_store, args.mid, answer_words=300)
        as_format_1(one_store, single)
        t_seg, t_one = side_by_side(
            repeat, lambda: seg_store.read(segmented), lambda: one_store.read(single)
        )
        report(f"(e) replay {len(pieces)} segments / one events.log", t_seg, t_one, 1.05)


def copying_with_fsync(files: list[Path], into: Path) -> Callable[[], Path]:
    """The baseline of a fork: copy every file of the session's log and fsync each copy."""

    def copy_fsync() -> Path:
        into.mkdir()
        for path in files:
            shutil.copyfile(path, into / path.name)
            fd = os.open(into / path.name, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        return into

    return copy_fsync


def _part_i(args: argparse.Namespace, root: Path, store: SessionStore, fork_small: Forker) -> None:
    # (i) long answers, many sealed segments: a fork links every sealed segment whole and
    # must find each one's bound from its seal record alone.
    started = time.perf_counter()
    long = write_big_session(store, args.long, answer_words=300)
    _resegment(store, long, args.roll_bytes)
    pieces = log_pieces(store.session_dir(long), store.manifest(long))
    save_turn_table(pieces)
    files = [p.path for p in pieces]
    size = sum(p.stat().st_size for p in files)
    print(
        f"built {args.long} turns of 300 words ({size / 1e6:.0f} MB, {len(pieces)} segments) "
        f"in {time.perf_counter() - started:.1f} s"
    )
    remove = removing(store)
    started = time.perf_counter()
    fork_long = Forker(store, long)  # its first targets query checks every frame's CRC once
    print(f"(i) first targets query of {args.long} turns: {time.perf_counter() - started:.3f} s")
    t_long, t_small = side_by_side(args.repeat, fork_long, fork_small, remove)
    report(
        f"(i) fork at last of {args.long} ({len(pieces)} segments) / of {args.small}",
        t_long,
        t_small,
        1.5,
    )
    t_long, t_copy = side_by_side(
        args.repeat, fork_long, copying_with_fsync(files, root / "copies-i"), remove
    )
    report(
        f"(i) fork at last of {args.long} ({size / 1e6:.0f} MB) / copy+fsync", t_long, t_copy, 0.2
    )


def _part_f(store: SessionStore, small: str, repeat: int) -> None:
    # (f) a turn (two commits, two fsyncs) with sidecar records / without.
    with store.open_writer(small) as writer:
        numbers = iter(range(10**6))

        def turn_with() -> None:
            complete_turn(writer, f"with-{next(numbers)}")

        def turn_without() -> None:
            # the benchmark's switch: a writer whose sidecars broke builds no entries either
            sidecars = writer._log._sidecars
            sidecars.broken = True
            try:
                complete_turn(writer, f"without-{next(numbers)}")
            finally:
                sidecars.broken = False

        t_with, t_without = side_by_side(repeat * 20, turn_with, turn_without)
    report("(f) a turn with sidecars / without", t_with, t_without, 1.05)


def _part_h(store: SessionStore, small: str, fork_small: Forker, repeat: int) -> None:
    cli = [sys.executable, "-m", "branchwise.desktop.entry", "--data-dir", str(store.root)]
    request = fork_small.request
    ops = iter(range(10**6))

    def cli_fork() -> None:
        subprocess.run(
            [
                *cli,
                *("session", "fork", small, "--turn", str(request.turn_id)),
                *("--boundary", str(request.boundary_sequence)),
                *("--operation-id", f"cli-{next(ops)}"),
            ],
            check=True,
            capture_output=True,
        )

    def cli_lineage() -> None:
        subprocess.run([*cli, "session", "lineage", small], check=True, capture_output=True)

    t_cli_fork, t_cli_lineage = side_by_side(repeat, cli_fork, cli_lineage)
    report("(h) CLI session fork / session lineage", t_cli_fork, t_cli_lineage, 1.2)


def _resegment(store: SessionStore, session_id: str, roll_bytes: int) -> None:
    """Split a session's one segment at ``roll_bytes`` (what a writer's rolls would give).

    Every segment but the last gets the seal record a roll appends to its ``.idx``.
    """
    from branchwise.core.log.scan import scan_bytes
    from branchwise.core.log.segments import read_session_log, segment_name
    from branchwise.core.log.sidecars import (
        INDEX_SUFFIX,
        SEALS_SEGMENT,
        IndexRecord,
        frame_crc,
        sidecar_entries,
        write_sidecars,
    )
    from branchwise.core.projection.turns import TurnTracker

    directory = store.session_dir(session_id)
    manifest = store.manifest(session_id)
    data = read_session_log(directory, manifest).data
    frames = scan_bytes(data).frames
    log_dir = directory / manifest.log_dir
    for old in log_dir.iterdir():
        old.unlink()
    start = 0
    groups: list[list[Any]] = [[]]
    for frame in frames:
        if frame.offset - start >= roll_bytes:
            groups.append([])
            start = frame.offset
        groups[-1].append(frame)
    tracker = TurnTracker()
    for number, group in enumerate(groups):
        first, last = group[0], group[-1]
        seq = first.events[0]["seq"]
        path = log_dir / segment_name(first.commit, seq)
        path.write_bytes(data[first.offset : last.end])
        entries = list(sidecar_entries(group, tracker, data, first.offset))
        write_sidecars(path, entries)
        if number < len(groups) - 1:
            seal = IndexRecord(
                last.events[-1]["seq"],
                last.commit,
                last.offset - first.offset,
                last.end - first.offset,
                frame_crc(data, last.offset),
                SEALS_SEGMENT,
            )
            with open(path.with_suffix(INDEX_SUFFIX), "ab") as index:
                index.write(seal.to_bytes())


if __name__ == "__main__":
    main()
