"""Desktop benchmarks (offscreen), each measured side by side in fresh processes.

    python tests/benchmarks/bench_desktop.py [--runs 3]

1. Opening a 10,000-turn conversation until its first page is painted, vs. a
   10-turn one (target ratio <= 3).
2. Process memory (RSS) once the conversation is fully loaded and its fork
   targets read, 10,000 turns vs. 10 (target: under +150 MB).
3. App start until the window is first shown, 1,000 sessions on disk vs. none
   (target ratio <= 1.5), measured as the wall time of the whole process and
   as the in-process time from ``run_app`` to the shown window.

Every measurement runs in its own process, so one does not warm or bloat
the next; medians of ``--runs`` runs are reported.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import build_session, report  # noqa: E402

BIG, SMALL = 10_000, 10
SESSIONS = 1_000


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def child_open(root: Path, session_id: str) -> None:
    """In a fresh process: open one conversation, time its first paint, then its RSS."""
    import asyncio

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QEvent, QObject
    from PySide6.QtWidgets import QApplication

    from branchwise.desktop.app import run_on_qt_loop
    from branchwise.desktop.host.host import Host
    from branchwise.desktop.widgets.style import apply_style
    from branchwise.desktop.widgets.window import MainWindow

    app = QApplication.instance() or QApplication([])
    apply_style(app)

    class FirstPaint(QObject):
        def __init__(self) -> None:
            super().__init__()
            self.at: float | None = None

        def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
            if event.type() == QEvent.Type.Paint and self.at is None:
                self.at = time.perf_counter()
            return super().eventFilter(watched, event)

    async def main() -> int:
        host = Host(root)
        host.start()
        window = MainWindow(host)
        window.show()
        await asyncio.sleep(0.3)  # let the window paint and settle
        rss_before = _rss_mb()
        spy = FirstPaint()
        start = time.perf_counter()
        tab = window.open_tab(session_id)
        # The body holding the turn widgets covers the viewport, so it is what paints.
        tab.transcript.widget().installEventFilter(spy)
        deadline = start + 60
        while spy.at is None:  # never processEvents() inside a task: it re-enters the loop
            if time.perf_counter() > deadline:
                raise SystemExit("the transcript never painted")
            await asyncio.sleep(0)
        painted = spy.at - start
        widgets = len(tab.transcript.turn_widgets())
        session = host.session(session_id)
        assert session is not None
        while not session.loaded or session.targets is None:
            await asyncio.sleep(0.01)
        loaded = time.perf_counter() - start
        await asyncio.sleep(0.2)
        rss_after = _rss_mb()
        print(
            orjson.dumps(
                {
                    "paint": painted,
                    "loaded": loaded,
                    "widgets": widgets,
                    "turns": len(session.rows),
                    "rss_before": rss_before,
                    "rss_after": rss_after,
                }
            ).decode(),
            flush=True,
        )
        # Shut the host down before the last window closes: closing it quits the
        # application, which stops the loop under this coroutine.
        await host.shutdown()
        window.close()
        return 0

    run_on_qt_loop(main)


def _run_child(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, *args],
        capture_output=True,
        check=True,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    return orjson.loads(out.stdout.splitlines()[-1])


def _start_app(root: Path) -> tuple[float, float]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "BRANCHWISE_EXIT_AFTER_SHOW": "1"}
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "branchwise.desktop.entry", "--data-dir", str(root)],
        capture_output=True,
        check=True,
        env=env,
    )
    wall = time.perf_counter() - start
    return wall, float(orjson.loads(out.stdout.splitlines()[-1])["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child-open", nargs=2, metavar=("ROOT", "SESSION"))
    args = parser.parse_args()
    if args.child_open:
        child_open(Path(args.child_open[0]), args.child_open[1])
        return

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        roots = {n: base / f"open-{n}" for n in (SMALL, BIG)}
        sessions = {}
        for n, root in roots.items():
            (root / "sessions").mkdir(parents=True, mode=0o700)
            sessions[n] = build_session(root, n, title=f"{n} turns")
        size = (roots[BIG] / "sessions" / sessions[BIG] / "events.log").stat().st_size
        print(f"# {BIG:,}-turn log: {size / 1e6:.1f} MB")

        results: dict[int, list[dict]] = {SMALL: [], BIG: []}
        for _ in range(args.runs):
            for n in (SMALL, BIG):
                results[n].append(_run_child("--child-open", str(roots[n]), sessions[n]))

        def median(n: int, key: str) -> float:
            return statistics.median(r[key] for r in results[n])

        for n in (SMALL, BIG):
            print(
                f"# {n:>6,} turns: first paint {median(n, 'paint') * 1000:7.1f} ms with "
                f"{results[n][0]['widgets']} turn widgets; fully loaded with targets "
                f"{median(n, 'loaded') * 1000:7.1f} ms; RSS {median(n, 'rss_after'):6.1f} MB"
            )
        report(
            "open to first painted page, 10,000 vs 10 turns",
            median(BIG, "paint"),
            median(SMALL, "paint"),
            3.0,
        )
        extra = median(BIG, "rss_after") - median(SMALL, "rss_after")
        verdict = "ok" if extra < 150 else "OVER TARGET"
        print(
            f"RSS after opening, 10,000 vs 10 turns: +{extra:.1f} MB (target < +150 MB) [{verdict}]"
        )

        empty, full = base / "start-empty", base / "start-full"
        (empty / "sessions").mkdir(parents=True, mode=0o700)
        (full / "sessions").mkdir(parents=True, mode=0o700)
        for n in range(SESSIONS):
            build_session(full, 2, title=f"conversation {n}")
        walls: dict[str, list[float]] = {"empty": [], "full": []}
        inner: dict[str, list[float]] = {"empty": [], "full": []}
        for _ in range(args.runs):
            for name, root in (("empty", empty), ("full", full)):
                wall, seconds = _start_app(root)
                walls[name].append(wall)
                inner[name].append(seconds)
        print(
            f"# start, process wall time: none {statistics.median(walls['empty']) * 1000:.0f} ms,"
            f" {SESSIONS:,} sessions {statistics.median(walls['full']) * 1000:.0f} ms"
        )
        report(
            "app start to shown window (process), 1,000 sessions vs none",
            statistics.median(walls["full"]),
            statistics.median(walls["empty"]),
            1.5,
        )
        report(
            "app start to shown window (run_app), 1,000 sessions vs none",
            statistics.median(inner["full"]),
            statistics.median(inner["empty"]),
            1.5,
        )


if __name__ == "__main__":
    main()
