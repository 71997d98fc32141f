"""The window's event-loop lag while Send to several streams into the grid (issue 28).

    python tests/benchmarks/bench_fanout_grid.py [--chunks 1000] [--delay 0.002] [--repeat 5]

The real window (offscreen) and host, on the qasync loop, fan a question out
to 8 models of the fake OpenAI-compatible server (a separate process on
127.0.0.1, ``--chunks`` chunks each, ``--delay`` seconds apart) and show
the answers in the live grid (:class:`FanoutGrid`); the same with 1 model is
the baseline. The host's per-server limit applies as in the app: 4 of the 8
stream at once, the rest queue. Meanwhile a 10 ms timer on the UI loop
records how late each tick fires; the figure is the p99 of that lag over
the whole fan-out (target: 8 streams <= 2x 1 stream). A first round of
each, not counted, pays for lazy imports and first paints; then rounds
alternate 8 and 1 so load from neighbours on a shared machine hits both
alike; each side's number is the median of its rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from common import report  # noqa: E402
from helpers.gui import seed_session  # noqa: E402
from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from branchwise.core.conversation.fanout import fanout_targets  # noqa: E402
from branchwise.core.providers.openai import OpenAIProvider  # noqa: E402
from branchwise.core.settings import Settings  # noqa: E402
from branchwise.core.store.store import SessionStore  # noqa: E402
from branchwise.desktop.app import run_on_qt_loop  # noqa: E402
from branchwise.desktop.host.host import Host  # noqa: E402
from branchwise.desktop.widgets.window import MainWindow  # noqa: E402

MODELS = [f"model-{n}" for n in range(8)]
TICK_MS = 10


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class LagProbe:
    """A 10 ms timer on the UI loop; each tick records how much later than asked it fired."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._last = time.perf_counter()
        self._timer = QTimer()
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self._tick)

    def start(self) -> None:
        self.lags.clear()
        self._last = time.perf_counter()
        self._timer.start()

    def stop(self) -> list[float]:
        self._timer.stop()
        return list(self.lags)

    def _tick(self) -> None:
        now = time.perf_counter()
        self.lags.append(max(0.0, now - self._last - TICK_MS / 1000))
        self._last = now


def run(root: Path, base_url: str, chunks: int, repeat: int) -> tuple[list[float], list[float]]:
    store = SessionStore(root)
    source = seed_session(store, ["Which model answers best?"], "grid benchmark")
    eight: list[float] = []
    one: list[float] = []

    async def main() -> int:
        def provider_for(settings: Settings) -> OpenAIProvider:
            return OpenAIProvider(base_url, settings.model or MODELS[0])

        host = Host(root, provider_factory=provider_for)
        host.start()
        window = MainWindow(host)
        window.show()
        tab = window.open_tab(source)
        await asyncio.sleep(0.3)
        probe = LagProbe()
        warm_up: list[float] = []
        rounds = [((MODELS, warm_up), (MODELS[:1], warm_up))]  # imports, first paints
        rounds += [((MODELS, eight), (MODELS[:1], one))] * repeat
        for sides in rounds:
            for models, kept in sides:
                targets = fanout_targets(models, None, "demo")
                probe.start()
                grid = window._fan_out(tab, "go", targets)
                while not grid.finished_sending:
                    await asyncio.sleep(0.01)
                lags = probe.stop()
                streamed = sum(c.progress.chunks for c in grid.columns.values())
                assert streamed == chunks * len(models), (streamed, chunks, len(models))
                kept.append(percentile(lags, 0.99))
                grid.close()
                await asyncio.sleep(0.1)
        await host.shutdown()
        window.close()
        return 0

    run_on_qt_loop(main)
    return eight, one


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--delay", type=float, default=0.002)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    QApplication.instance() or QApplication([])
    server = subprocess.Popen(
        [sys.executable, str(HERE.parent / "helpers" / "fake_openai_server.py"), "--port", "0"]
        + ["--chunks", str(args.chunks), "--delay", str(args.delay)]
        + ["--models", ",".join(MODELS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as tmp:
            eight, one = run(Path(tmp), base_url, args.chunks, args.repeat)
        print(
            "p99 lag per round (ms): 8 streams "
            + ", ".join(f"{v * 1000:.1f}" for v in eight)
            + "; 1 stream "
            + ", ".join(f"{v * 1000:.1f}" for v in one)
        )
        report(
            f"grid, 8 x {args.chunks} chunks vs 1: UI loop lag p99",
            statistics.median(eight),
            statistics.median(one),
            2.0,
        )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait()


if __name__ == "__main__":
    main()
