"""Attachments and forks, side by side in one run.

    python tests/benchmarks/bench_attachments.py [--turns 40] [--megabytes 100] [--repeat 25]

(a) a fork at the last turn of a conversation whose prompts carry
    ``--megabytes`` of attachments (ten images' worth of random bytes) vs. a
    fork of the same conversation without them: the references are copied
    with the log, the bytes never, so the two cost the same (target <= 1.2x);
(b) ten forks of the conversation with attachments: the disk they add, as a
    share of what the data root held before (target <= 1 %).

Each time is the best of ``--repeat`` runs, the two forks alternating (and
which goes first too), so load from neighbours on a shared machine hits both
alike.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branchwise.core import ForkRequest, SessionStore, fork, fork_targets
from branchwise.core.ids import new_id
from branchwise.core.projection import events as ev
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.store.attachments import BlobStore

FILES = 10


def build(store: SessionStore, turns: int, refs: tuple[AttachmentRef, ...]) -> str:
    """A conversation of ``turns`` turns; the first ``len(refs)`` prompts carry one file each."""
    with store.create("benchmark") as writer:
        for n in range(turns):
            turn, step = new_id("turn"), new_id("step")
            files = refs[n : n + 1]
            writer.commit(
                [
                    ev.turn_start(turn),
                    ev.user_message(new_id("msg"), f"Question {n}: what does this show?", files),
                    ev.step_start(step),
                ]
            )
            writer.commit(
                [
                    ev.assistant_message(new_id("msg"), "An answer. " * 150, "demo"),
                    ev.step_end(step),
                    ev.usage(10, 300, "demo"),
                    ev.turn_end(turn, "completed"),
                ]
            )
        return writer.session_id


def fork_last(store: SessionStore, session_id: str) -> str:
    """Fork at the last turn, as a click does (targets read, then the fork)."""
    answer = fork_targets(store, session_id)
    target = answer.targets[-1]
    assert target.boundary_sequence is not None
    request = ForkRequest(session_id, target.turn_id, target.boundary_sequence, answer.generation)
    return fork(store, request, new_id("op")).child_session_id


def disk_bytes(root: Path) -> int:
    """Bytes the data root takes on disk, each hard-linked file counted once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            info = os.lstat(os.path.join(folder, name))
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            total += info.st_blocks * 512
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--megabytes", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=25)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-attach-") as tmp:
        store = SessionStore(Path(tmp) / "root")
        blobs = BlobStore(store.root)
        size = args.megabytes * 1024 * 1024 // FILES
        refs = tuple(
            AttachmentRef(blobs.put(os.urandom(size)), size, "image/png", f"photo{n}.png")
            for n in range(FILES)
        )
        with_files = build(store, args.turns, refs)
        without = build(store, args.turns, ())
        times: dict[str, list[float]] = {"with": [], "without": []}
        pair = (("with", with_files), ("without", without))
        for run in range(args.repeat):
            for name, sid in pair if run % 2 == 0 else pair[::-1]:
                start = time.perf_counter()
                fork_last(store, sid)
                times[name].append(time.perf_counter() - start)
        ours, base = min(times["with"]), min(times["without"])
        ratio = ours / base
        print(
            f"(a) fork with {args.megabytes} MB of attachments {ours * 1000:.1f} ms, "
            f"without {base * 1000:.1f} ms: ratio {ratio:.2f} (target <= 1.2) "
            f"{'ok' if ratio <= 1.2 else 'OVER TARGET'}"
        )
        before = disk_bytes(store.root)
        blob_files = sum(1 for _ in blobs.stored())
        for _ in range(10):
            fork_last(store, with_files)
        after = disk_bytes(store.root)
        share = (after - before) / before
        print(
            f"(b) ten forks add {(after - before) / 1024:.0f} KiB "
            f"to {before / 1024 / 1024:.1f} MiB: "
            f"{share * 100:.3f} % (target <= 1 %) {'ok' if share <= 0.01 else 'OVER TARGET'}; "
            f"blob files {blob_files} -> {sum(1 for _ in blobs.stored())}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
