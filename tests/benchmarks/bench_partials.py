"""Bytes a streamed answer writes to the log (issue 11 item 4), deltas vs whole texts, one run.

A 120 KB answer (English with some Chinese and emoji, so UTF-8 has multi-byte
characters) streamed in 600 partial commits is written twice into fresh
sessions of one store:

* **ours**: the real turn runner with a flush interval of 0, so each chunk
  is one partial commit: a ``message/delta`` of the new text, then
  the closing commit with the whole answer;
* **whole texts** (the way before format 2): the same commits through the
  same writer, each partial one a ``message/assistant`` holding the whole
  answer so far.

Measured: the bytes the turn added to the session's segments, as a multiple
of the answer's UTF-8 size (target ≤ 2.5: the deltas plus the final whole
text), and the time each way took (every commit is fsynced).

Run: ``python tests/benchmarks/bench_partials.py [--kb 120] [--commits 600] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from helpers.providers import ScriptedProvider  # noqa: E402

from branchwise.core import SessionStore  # noqa: E402
from branchwise.core.projection import events as ev  # noqa: E402
from branchwise.core.runtime import TurnRunner  # noqa: E402
from branchwise.core.store.store import SessionWriter  # noqa: E402

PARAGRAPH = (
    "Branching lets you explore another direction without losing this one; "
    "分支让你探索另一个方向而不失去这一个 🙂. "
)
TARGET = 2.5


def answer_of(kb: int) -> str:
    """An answer of about ``kb`` KB of UTF-8."""
    text = PARAGRAPH * (kb * 1024 // len(PARAGRAPH.encode()) + 1)
    while len(text.encode()) > kb * 1024:
        text = text[:-1]
    return text


def chunks_of(text: str, count: int) -> list[str]:
    """``text`` cut into ``count`` pieces of about equal length (characters, as a server sends)."""
    size = len(text) / count
    cuts = [round(i * size) for i in range(count + 1)]
    return [text[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]


def log_bytes(store: SessionStore, session_id: str) -> int:
    """The size of a session's log: its segment files (sidecar caches not counted)."""
    directory = store.session_dir(session_id)
    return sum(p.stat().st_size for p in directory.glob("log*/*.seg"))


def deltas(store: SessionStore, chunks: list[str]) -> tuple[int, float]:
    """The real runner; returns the bytes the turn added and its time."""
    with store.create("deltas") as writer:
        before = log_bytes(store, writer.session_id)
        start = time.perf_counter()
        runner = TurnRunner(writer, ScriptedProvider(chunks), flush_interval=0)
        result = asyncio.run(runner.run("q"))
        elapsed = time.perf_counter() - start
    assert result.text == "".join(chunks)
    return log_bytes(store, writer.session_id) - before, elapsed


def whole_texts(store: SessionStore, chunks: list[str]) -> tuple[int, float]:
    """The commits the runner wrote before format 2, through the same writer."""
    with store.create("whole") as writer:
        before = log_bytes(store, writer.session_id)
        start = time.perf_counter()
        _old_turn(writer, chunks)
        elapsed = time.perf_counter() - start
    return log_bytes(store, writer.session_id) - before, elapsed


def _old_turn(writer: SessionWriter, chunks: list[str]) -> None:
    writer.commit([ev.turn_start("t"), ev.user_message("u", "q"), ev.step_start("s")])
    text = ""
    for chunk in chunks:
        text += chunk
        writer.commit([ev.assistant_message("a", text, "scripted", partial=True)])
    writer.commit(
        [
            ev.assistant_message("a", text, "scripted"),
            ev.step_end("s"),
            ev.usage(1, len(chunks), "scripted"),
            ev.turn_end("t", "completed"),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kb", type=int, default=120)
    parser.add_argument("--commits", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    answer = answer_of(args.kb)
    size = len(answer.encode())
    chunks = chunks_of(answer, args.commits)
    ours, old = [], []
    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore(Path(tmp))
        for _ in range(args.repeat):  # alternating: the same conditions for both
            ours.append(deltas(store, chunks))
            old.append(whole_texts(store, chunks))
    # Timestamps and ids vary a few bytes from run to run; the largest run is reported.
    ours_bytes, old_bytes = max(b for b, _ in ours), max(b for b, _ in old)
    ratio = ours_bytes / size
    verdict = "ok" if ratio <= TARGET else "OVER TARGET"
    print(f"answer: {size:,} bytes of UTF-8 in {len(chunks)} partial commits")
    print(
        f"log bytes of the turn: deltas {ours_bytes:,}  whole texts {old_bytes:,}  "
        f"(whole texts / deltas {old_bytes / ours_bytes:.1f}x)"
    )
    print(f"deltas / answer ratio {ratio:.2f} (target <= {TARGET})  {verdict}")
    print(f"whole texts / answer ratio {old_bytes / size:.1f} (before format 2)")
    ours_time = statistics.median(t for _, t in ours)
    old_time = statistics.median(t for _, t in old)
    print(
        f"turn time: deltas {ours_time * 1000:.0f} ms  whole texts {old_time * 1000:.0f} ms  "
        f"ratio {ours_time / old_time:.2f}"
    )


if __name__ == "__main__":
    main()
