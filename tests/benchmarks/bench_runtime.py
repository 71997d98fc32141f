"""Turn runner overhead per streamed chunk (issue 4), side by side in one run.

A 10,000-chunk reply from the fake OpenAI-compatible server (a separate
process on 127.0.0.1) is consumed (a) by the turn runner — committing the
question, partial text every second and the closing commit, with a listener
receiving every chunk — and (b) by just iterating the provider's chunks.

Run: ``python tests/benchmarks/bench_runtime.py [--chunks 10000]``
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

from branchwise.core import SessionStore  # noqa: E402
from branchwise.core.providers.base import TextChunk  # noqa: E402
from branchwise.core.providers.openai import OpenAIProvider  # noqa: E402
from branchwise.core.runtime import TurnListener, TurnRunner  # noqa: E402


class Counting(TurnListener):
    def __init__(self) -> None:
        self.chunks = 0

    def text_received(self, turn_id: str, message_id: str, chunk: str) -> None:
        self.chunks += 1


async def bare(provider: OpenAIProvider, expected: int) -> float:
    start = time.perf_counter()
    count = 0
    async for item in provider.stream([{"role": "user", "content": "go"}]):
        if isinstance(item, TextChunk):
            count += 1
    assert count == expected, count
    return time.perf_counter() - start


async def runner(provider: OpenAIProvider, store: SessionStore, expected: int) -> float:
    with store.create("bench") as writer:
        listener = Counting()
        start = time.perf_counter()
        result = await TurnRunner(writer, provider, listener).run("go")
        elapsed = time.perf_counter() - start
    assert result.end_reason == "completed" and listener.chunks == expected
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    server = subprocess.Popen(
        [
            sys.executable,
            str(HERE.parent / "helpers" / "fake_openai_server.py"),
            "--port",
            "0",
            "--chunks",
            str(args.chunks),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        provider = OpenAIProvider(base_url, "fake-model")
        with tempfile.TemporaryDirectory() as tmp:
            store = SessionStore(Path(tmp))

            async def rounds() -> tuple[list[float], list[float]]:
                ours, floor = [], []
                for _ in range(args.rounds):  # interleaved: same conditions for both
                    floor.append(await bare(provider, args.chunks))
                    ours.append(await runner(provider, store, args.chunks))
                return ours, floor

            ours, floor = asyncio.run(rounds())
        report(
            f"runner vs bare provider, {args.chunks} chunks",
            statistics.median(ours),
            statistics.median(floor),
            1.2,
        )
        print(
            f"    per chunk: runner {statistics.median(ours) / args.chunks * 1e6:.1f} us, "
            f"bare {statistics.median(floor) / args.chunks * 1e6:.1f} us"
        )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait()


if __name__ == "__main__":
    main()
