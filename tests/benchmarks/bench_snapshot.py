"""Projection snapshot benchmarks (issue 11 item 3), side by side in one run.

    python tests/benchmarks/bench_snapshot.py [--big 10000] [--small 10] [--runs 3]
        [--closed-turns 20000] [--only-closed]

(a) Opening a conversation the way the desktop does (``Host.open_session``:
    the preview, the writer open, the rows) until its branch buttons work
    (``OpenSession.targets`` read from committed history) and until it is
    fully loaded, in a fresh process each: ``--big`` turns with its
    projection snapshot, the same without one (deleted before each run), and
    ``--small`` turns. Target: big with snapshot <= 3x small.
(b) Cold read of the big session's projection (``store.read``) through the
    snapshot, and with a full replay, vs reading the log and ``orjson.loads``
    of every payload (``bench_log`` (b)'s floor). The README's cold-replay
    ratio is the full one.
(c) A writer open of the big session with its snapshot vs without.
(d) The first cold read (``store.read`` for the projection) of a session of
    ``--closed-turns`` turns that one writer wrote turn by turn from empty and
    closed (its open replayed nothing, so only its close can leave a
    snapshot) vs reading the log and ``orjson.loads`` of every payload
    (target <= 1.3); and the same read with no snapshot, as before.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ANSWER, build_session, report  # noqa: E402

from branchwise.core.log.frames import HEADER, HEADER_SIZE  # noqa: E402
from branchwise.core.log.segments import log_pieces, read_session_log  # noqa: E402
from branchwise.core.projection.snapshot_cache import SNAPSHOT_FILE, wait_for_snapshots  # noqa: E402
from branchwise.core.store.manifest import load_manifest  # noqa: E402
from branchwise.core.store.store import SessionStore  # noqa: E402


def child_open(root: Path, session_id: str) -> None:
    """In a fresh process: open one conversation as the desktop does; print the times."""
    from branchwise.desktop.host.host import Host

    async def main() -> dict[str, float]:
        host = Host(root)
        host.start()
        start = time.perf_counter()
        session = host.open_session(session_id)
        targets = loaded = None
        while targets is None or loaded is None:
            now = time.perf_counter()
            if targets is None and session.targets is not None:
                targets = now - start
            if loaded is None and session.loaded:
                loaded = now - start
            if now - start > 120:
                raise SystemExit("the conversation never loaded")
            await asyncio.sleep(0.001)
        assert session.targets is not None and session.targets.answer.targets
        await host.shutdown()
        return {"targets": targets, "loaded": loaded, "turns": len(session.rows)}

    print(orjson.dumps(asyncio.run(main())).decode(), flush=True)


def child_window(root: Path, session_id: str) -> None:
    """In a fresh process: open one conversation in the real window (offscreen); print the times.

    ``targets``: from ``open_tab`` until the branch buttons work (the tab's
    session has fork targets); ``paint``: until the transcript first paints.
    """
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QEvent, QObject
    from PySide6.QtWidgets import QApplication

    from branchwise.desktop.app import run_on_qt_loop
    from branchwise.desktop.host.host import Host
    from branchwise.desktop.widgets.style import apply_style
    from branchwise.desktop.widgets.window import MainWindow

    app = QApplication.instance() or QApplication([])
    apply_style(app)
    app.setQuitOnLastWindowClosed(False)  # main() ends the loop, not the closed window

    class FirstPaint(QObject):
        at: float | None = None

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
        spy = FirstPaint()
        start = time.perf_counter()
        tab = window.open_tab(session_id)
        tab.transcript.widget().installEventFilter(spy)
        session = host.session(session_id)
        assert session is not None
        targets = loaded = None
        while targets is None or loaded is None or spy.at is None:
            now = time.perf_counter()
            if targets is None and session.targets is not None:
                targets = now - start
            if loaded is None and session.loaded:
                loaded = now - start
            if now - start > 120:
                raise SystemExit("the conversation never loaded")
            await asyncio.sleep(0.001)
        paint = spy.at - start
        result = {"targets": max(targets, paint), "paint": paint, "loaded": max(loaded, paint)}
        print(orjson.dumps(result).decode(), flush=True)
        window.close()
        await host.shutdown()
        return 0

    run_on_qt_loop(main)


def _run_child(root: Path, session_id: str, mode: str = "--child-open") -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, mode, str(root), session_id],
        capture_output=True,
        check=True,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    wait_for_snapshots()
    return orjson.loads(out.stdout.splitlines()[-1])


def _snapshot_of(root: Path, session_id: str) -> Path:
    return root / "sessions" / session_id / "log" / SNAPSHOT_FILE


def _prepare(root: Path, turns: int) -> str:
    """A format-2 session of ``turns`` turns, migrated and with its snapshot written."""
    (root / "sessions").mkdir(parents=True, mode=0o700)
    session_id = build_session(root, turns, title=f"{turns} turns")
    store = SessionStore(root, snapshot_bytes=0)
    with store.open_writer(session_id):
        pass
    wait_for_snapshots()
    return session_id


def bench_open(base: Path, big: int, small: int, runs: int, mode: str) -> None:
    roots = {"small": base / f"small{mode}", "big": base / f"big{mode}"}
    sessions = {"small": _prepare(roots["small"], small), "big": _prepare(roots["big"], big)}
    snap = _snapshot_of(roots["big"], sessions["big"])
    kept = snap.read_bytes()
    results: dict[str, list[dict[str, float]]] = {"small": [], "with": [], "without": []}
    for _ in range(runs):
        results["small"].append(_run_child(roots["small"], sessions["small"], mode))
        snap.write_bytes(kept)
        results["with"].append(_run_child(roots["big"], sessions["big"], mode))
        snap.unlink()
        results["without"].append(_run_child(roots["big"], sessions["big"], mode))
    snap.write_bytes(kept)

    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for r in results[name])

    log_bytes = sum(
        p.path.stat().st_size
        for p in log_pieces(
            roots["big"] / "sessions" / sessions["big"],
            load_manifest(roots["big"] / "sessions" / sessions["big"]),
        )
    )
    where = "Host.open_session" if mode == "--child-open" else "the window's open_tab"
    sizes = f"{big:,}-turn log {log_bytes / 1e6:.1f} MB, snapshot {len(kept) / 1e6:.1f} MB"
    print(f"# {where}: {sizes}")
    for name, label in (
        ("small", f"{small:,} turns"),
        ("with", f"{big:,} turns, snapshot"),
        ("without", f"{big:,} turns, no snapshot"),
    ):
        print(
            f"# {label:<28} branch buttons work {median(name, 'targets') * 1000:8.1f} ms, "
            f"fully loaded {median(name, 'loaded') * 1000:8.1f} ms"
        )
    report(
        f"({'a' if mode == '--child-open' else 'aw'}) open until branch buttons work, "
        "big+snap / small",
        median("with", "targets"),
        median("small", "targets"),
        3.0,
    )
    report(
        "    same, big without snapshot / small",
        median("without", "targets"),
        median("small", "targets"),
        3.0,
    )
    report(
        "    fully loaded (writer open), big+snap / without",
        median("with", "loaded"),
        median("without", "loaded"),
        1.0,
    )


def bench_read(base: Path, turns: int, runs: int) -> None:
    root = base / "read"
    session_id = _prepare(root, turns)
    directory = root / "sessions" / session_id
    manifest = load_manifest(directory)

    def floor() -> None:
        gc.disable()
        buf = read_session_log(directory, manifest).data
        payloads, offset = [], 0
        while offset < len(buf):
            _, _, length, _, _ = HEADER.unpack_from(buf, offset)
            start = offset + HEADER_SIZE
            payloads.append(orjson.loads(buf[start : start + length]))
            offset = start + length
        gc.enable()

    def timed(call: object) -> float:
        start = time.perf_counter()
        call()  # type: ignore[operator]
        return time.perf_counter() - start

    def via_snapshot() -> None:
        snapshot = SessionStore(root).read(session_id, every_frame=False)
        assert snapshot.scan.resumed is not None and len(snapshot.projection.turns) == turns

    def full() -> None:
        snapshot = SessionStore(root).read(session_id)
        assert len(snapshot.projection.turns) == turns

    store = SessionStore(root, snapshot_bytes=None)

    def writer_with() -> None:
        with store.open_writer(session_id):
            pass

    snap = _snapshot_of(root, session_id)
    kept = snap.read_bytes()

    def writer_without() -> None:
        snap.unlink()
        try:
            with store.open_writer(session_id):
                pass
        finally:
            snap.write_bytes(kept)

    times: dict[str, list[float]] = {}
    for _ in range(runs):
        for name, call in (
            ("floor", floor),
            ("snapshot", via_snapshot),
            ("full", full),
            ("writer with", writer_with),
            ("writer without", writer_without),
        ):
            times.setdefault(name, []).append(timed(call))
    best = {name: min(values) for name, values in times.items()}
    report("(b) cold read via snapshot / read + orjson.loads", best["snapshot"], best["floor"], 2.0)
    report("(b') cold read, full replay / read + orjson.loads", best["full"], best["floor"], 2.0)
    report(
        "(c) writer open with snapshot / without",
        best["writer with"],
        best["writer without"],
        1.0,
    )


class _NoFsync:
    """The writer's system calls without the fsync: builds a big session at memory speed.

    What is on disk is what a real writer leaves; only durability is skipped.
    """

    write = staticmethod(os.write)
    ftruncate = staticmethod(os.ftruncate)

    @staticmethod
    def fsync(fd: int) -> None:
        del fd


def bench_closed(base: Path, turns: int, runs: int) -> None:
    root = base / "closed"
    store = SessionStore(root, _NoFsync())
    started = time.perf_counter()
    with store.create("written turn by turn") as writer:
        session_id = writer.session_id
        for n in range(turns):
            writer.commit(
                [
                    {"type": "turn/start", "turnId": f"t{n}"},
                    {"type": "message/user", "messageId": f"u{n}", "content": f"Question {n}?"},
                ]
            )
            writer.commit(
                [
                    {
                        "type": "message/assistant",
                        "messageId": f"a{n}",
                        "content": ANSWER,
                        "model": "demo",
                    },
                    {"type": "usage", "inputTokens": 10, "outputTokens": 300, "model": "demo"},
                    {"type": "turn/end", "turnId": f"t{n}", "reason": "completed"},
                ]
            )
    wait_for_snapshots()  # what the close left, if anything
    directory = root / "sessions" / session_id
    manifest = load_manifest(directory)
    size = sum(p.path.stat().st_size for p in log_pieces(directory, manifest))
    took = time.perf_counter() - started
    print(f"wrote {turns} turns ({size / 1e6:.0f} MB) by a writer in {took:.1f} s")
    snap = directory / "log" / SNAPSHOT_FILE
    kept = snap.read_bytes() if snap.exists() else None
    aside = snap.with_name("aside")

    def floor() -> None:
        gc.disable()
        buf = read_session_log(directory, manifest).data
        payloads, offset = [], 0
        while offset < len(buf):
            _, _, length, _, _ = HEADER.unpack_from(buf, offset)
            start = offset + HEADER_SIZE
            payloads.append(orjson.loads(buf[start : start + length]))
            offset = start + length
        gc.enable()

    def first_read() -> None:
        snapshot = SessionStore(root).read(session_id, every_frame=False)
        assert len(snapshot.projection.turns) == turns

    def without_snapshot() -> None:
        if kept is not None:
            snap.rename(aside)
        try:
            first_read()
        finally:
            if kept is not None:
                aside.rename(snap)

    times: dict[str, list[float]] = {}
    for _ in range(runs):
        for name, call in (("floor", floor), ("read", first_read), ("bare", without_snapshot)):
            start = time.perf_counter()
            call()
            times.setdefault(name, []).append(time.perf_counter() - start)
    best = {name: min(values) for name, values in times.items()}
    label = "with the close's snapshot" if kept is not None else "NO SNAPSHOT LEFT"
    report(
        f"(d) first cold read after a writer's close ({label}) / read + orjson.loads",
        best["read"],
        best["floor"],
        1.3,
    )
    report(
        "(d') the same without a snapshot / read + orjson.loads", best["bare"], best["floor"], 1.3
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=10)
    parser.add_argument("--read-turns", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child-open", nargs=2, metavar=("ROOT", "SESSION"))
    parser.add_argument("--child-window", nargs=2, metavar=("ROOT", "SESSION"))
    parser.add_argument("--no-window", action="store_true", help="skip the Qt window run")
    parser.add_argument("--closed-turns", type=int, default=20_000)
    parser.add_argument("--only-closed", action="store_true", help="run (d) alone")
    args = parser.parse_args()
    if args.child_open:
        child_open(Path(args.child_open[0]), args.child_open[1])
        return
    if args.child_window:
        child_window(Path(args.child_window[0]), args.child_window[1])
        return
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        if args.only_closed:
            bench_closed(Path(tmp), args.closed_turns, max(args.runs, 3))
            return
        bench_open(Path(tmp), args.big, args.small, args.runs, "--child-open")
        if not args.no_window:
            bench_open(Path(tmp), args.big, args.small, args.runs, "--child-window")
        bench_read(Path(tmp), args.read_turns, max(args.runs, 3))
        bench_closed(Path(tmp), args.closed_turns, max(args.runs, 3))


if __name__ == "__main__":
    main()
