"""Log benchmarks (issue 2), measured side by side in one run.

(a) commit append with fsync vs. a bare ``os.write`` + ``os.fsync`` of the same bytes;
(b) cold open + full replay of a 20,000-turn session vs. reading the file and
    ``orjson.loads`` of every payload.

Run: ``python tests/benchmarks/bench_log.py [--turns 20000]``
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from common import ANSWER, best_of, build_session, report  # noqa: E402

from branchwise.core import SessionStore
from branchwise.core.log.frames import HEADER, HEADER_SIZE, encode_frame


def bench_append(root: Path, commits: int) -> None:
    store = SessionStore(root)
    writer = store.create("append")
    events = [{"type": "message/user", "messageId": "m", "content": ANSWER[:500]}]
    frames = [encode_frame(n + 2, [{"seq": n + 2, "ts": 1.0, **events[0]}]) for n in range(commits)]
    bare_path = root / "bare.log"
    fd = os.open(bare_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def ours() -> None:
        for _ in range(commits):
            writer.commit(events)

    def bare() -> None:
        for data in frames:
            os.write(fd, data)
            os.fsync(fd)

    # Interleave rounds so both see the same disk conditions.
    ours_t, bare_t = [], []
    for _ in range(3):
        bare_t.append(best_of(1, bare))
        ours_t.append(best_of(1, ours))
    os.close(fd)
    writer.close()
    report(f"(a) append+fsync x{commits} vs bare write+fsync", min(ours_t), min(bare_t), 1.5)


def bench_replay(root: Path, turns: int) -> None:
    session_id = build_session(root, turns)
    log = root / "sessions" / session_id / "events.log"  # build_session writes format 1
    size = log.stat().st_size
    store = SessionStore(root)

    def ours() -> None:
        snapshot = store.read(session_id)
        assert len(snapshot.projection.turns) == turns

    def floor() -> list[object]:
        # The floor keeps what it decodes (a replay must) and pauses the GC,
        # as our replay does: the strictest fair floor.
        gc.disable()
        buf = log.read_bytes()
        payloads, offset = [], 0
        while offset < len(buf):
            _, _, length, _, _ = HEADER.unpack_from(buf, offset)
            start = offset + HEADER_SIZE
            payloads.append(orjson.loads(buf[start : start + length]))
            offset = start + length
        gc.enable()
        return payloads

    # Alternate rounds so both meet the same machine load; the minimum is the
    # least-disturbed run of each.
    floor_runs, ours_runs = [], []
    for _ in range(5):
        floor_runs.append(best_of(1, floor))
        ours_runs.append(best_of(1, ours))
    floor_t, ours_t = min(floor_runs), min(ours_runs)
    print(f"    session: {turns} turns, {size / 1e6:.1f} MB log")
    report("(b) cold open + replay vs read + orjson.loads", ours_t, floor_t, 2.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20_000)
    parser.add_argument("--commits", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        bench_append(Path(tmp) / "a", args.commits)
        bench_replay(Path(tmp) / "b", args.turns)


if __name__ == "__main__":
    main()
