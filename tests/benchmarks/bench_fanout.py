"""Fan-out benchmarks (issue 28), each measured side by side with its baseline in one run.

    python tests/benchmarks/bench_fanout.py [--turns 20000] [--repeat 5] [--chunks 1000]

(a) making 8 branches (``fan_out`` with 8 targets: the journal record, 8
    reservations and 8 children made durable together) at the end of a
    20,000-turn conversation vs. making 1 the same way; target ratio <= 2.
(b) 8 answers of ``--chunks`` chunks each, streamed at once from the fake
    OpenAI-compatible server (a separate process on 127.0.0.1) through the
    real turn runner into the 8 branches (``answer_fanout``: a writer per
    branch, partial commits, closing commits, a listener hearing every chunk)
    vs. the same 8 streams' bare provider iteration, also at once; this
    process's CPU time (all threads), target ratio <= 1.3.

Each number is the best (a) or median (b) of ``--repeat`` runs, ours and the
baseline alternating, so load from neighbours on a shared machine hits both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from common import report  # noqa: E402
from helpers.sessions import write_big_session  # noqa: E402

from branchwise.core import SessionStore  # noqa: E402
from branchwise.core.conversation.fanout import Fanout, fan_out, fanout_targets  # noqa: E402
from branchwise.core.conversation.settings import ConversationSettings  # noqa: E402
from branchwise.core.fanout_run import BranchSetup, FanoutListener, answer_fanout  # noqa: E402
from branchwise.core.providers.base import TextChunk  # noqa: E402
from branchwise.core.providers.openai import OpenAIProvider  # noqa: E402

MODELS = [f"model-{n}" for n in range(8)]


def bench_making(root: Path, turns: int, repeat: int) -> None:
    store = SessionStore(root / "making")
    started = time.perf_counter()
    source = write_big_session(store, turns, answer_words=300)
    print(f"built {turns} turns in {time.perf_counter() - started:.1f} s")
    eight, one = fanout_targets(MODELS, None, "demo"), fanout_targets(MODELS[:1], None, "demo")
    ours: list[float] = []
    base: list[float] = []
    for round_ in range(repeat):
        for targets, kept, name in ((eight, ours, "eight"), (one, base, "one")):
            start = time.perf_counter()
            made = fan_out(store, source, "Which is best?", targets, f"{name}-{round_}")
            kept.append(time.perf_counter() - start)
            assert len(made.branches) == len(targets)
    report(f"8 branches vs 1 at the end of {turns} turns", min(ours), min(base), 2.0)


class Counting(FanoutListener):
    def __init__(self) -> None:
        self.chunks = 0

    def text(self, branch: object, chunk: str) -> None:
        self.chunks += 1


async def _bare(base_url: str, chunks: int) -> None:
    async def one(model: str) -> int:
        provider = OpenAIProvider(base_url, model)
        count = 0
        async for item in provider.stream([{"role": "user", "content": "go"}]):
            if isinstance(item, TextChunk):
                count += 1
        return count

    counts = await asyncio.gather(*(one(model) for model in MODELS))
    assert counts == [chunks] * len(MODELS), counts


async def _through_runner(store: SessionStore, fanout: Fanout, base_url: str, chunks: int) -> None:
    def setup_for(branch: object, settings: ConversationSettings) -> BranchSetup:
        return BranchSetup(OpenAIProvider(base_url, settings.model or "fake-model"), "", base_url)

    listener = Counting()
    outcomes = await answer_fanout(store, fanout, setup_for, listener, per_server=len(MODELS))
    assert {o.end_reason for o in outcomes} == {"completed"}, outcomes
    assert listener.chunks == chunks * len(MODELS)


def bench_streams(root: Path, chunks: int, repeat: int) -> None:
    server = subprocess.Popen(
        [sys.executable, str(HERE.parent / "helpers" / "fake_openai_server.py"), "--port", "0"]
        + ["--chunks", str(chunks), "--models", ",".join(MODELS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        store = SessionStore(root / "streams")
        with store.create("streams") as writer:
            source = writer.session_id
        targets = fanout_targets(MODELS, None, "demo")
        ours: list[float] = []
        floor: list[float] = []
        for round_ in range(repeat):
            fanout = fan_out(store, source, "go", targets, f"streams-{round_}")
            start = time.process_time()
            asyncio.run(_bare(base_url, chunks))
            floor.append(time.process_time() - start)
            start = time.process_time()
            asyncio.run(_through_runner(store, fanout, base_url, chunks))
            ours.append(time.process_time() - start)
        report(
            f"8 x {chunks} chunks: runner vs bare, CPU",
            statistics.median(ours),
            statistics.median(floor),
            1.3,
        )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chunks", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench_making(Path(tmp), args.turns, args.repeat)
        bench_streams(Path(tmp), args.chunks, args.repeat)


if __name__ == "__main__":
    main()
