"""Shared builders for benchmarks: big sessions written fast, timing helpers."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from branchwise.core.ids import new_session_id
from branchwise.core.log.frames import encode_frame
from branchwise.core.store.manifest import Manifest, save_manifest

ANSWER = (
    "Branching lets you explore another direction without losing this one. " * 28
)  # ~2 KB per answer, so 20,000 turns make a log of more than 40 MB


def build_session(root: Path, turns: int, title: str = "benchmark") -> str:
    """Write a session of ``turns`` completed turns directly as frames (no per-commit fsync)."""
    session_id = new_session_id()
    directory = root / "sessions" / session_id
    directory.mkdir(parents=True, mode=0o700)
    save_manifest(directory, Manifest(session_id=session_id, title=title, created_at=time.time()))
    seq, commit = 0, 0
    chunks: list[bytes] = []

    def frame(events: list[dict]) -> None:
        nonlocal seq, commit
        commit += 1
        stamped = []
        for event in events:
            seq += 1
            stamped.append({"seq": seq, "ts": 1.0, **event})
        chunks.append(encode_frame(commit, stamped))

    frame([{"type": "session/created", "title": title, "kind": "root"}])
    for n in range(turns):
        turn = f"turn_{n:06d}"
        frame(
            [
                {"type": "turn/start", "turnId": turn},
                {"type": "message/user", "messageId": f"u{n}", "content": f"Question number {n}?"},
                {"type": "step/start", "stepId": f"s{n}"},
            ]
        )
        frame(
            [
                {
                    "type": "message/assistant",
                    "messageId": f"a{n}",
                    "content": ANSWER,
                    "model": "demo",
                },
                {"type": "step/end", "stepId": f"s{n}"},
                {"type": "usage", "inputTokens": 10, "outputTokens": 300, "model": "demo"},
                {"type": "turn/end", "turnId": turn, "reason": "completed"},
            ]
        )
    with open(directory / "events.log", "wb") as handle:
        handle.write(b"".join(chunks))
        os.fsync(handle.fileno())
    return session_id


def best_of(runs: int, fn: Callable[[], object]) -> float:
    """Median wall time of ``runs`` calls (seconds)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def report(name: str, ours: float, floor: float, target: float) -> None:
    """Print one side-by-side measurement and whether it meets its target."""
    ratio = ours / floor if floor else float("inf")
    verdict = "ok" if ratio <= target else "OVER TARGET"
    print(
        f"{name:<48} ours {ours * 1000:9.2f} ms  floor {floor * 1000:9.2f} ms  "
        f"ratio {ratio:5.2f} (target <= {target})  {verdict}"
    )
