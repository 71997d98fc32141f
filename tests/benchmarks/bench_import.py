"""Importing a generated ChatGPT export end to end: MB/s and peak RSS of ``branchwise import``.

    python tests/benchmarks/bench_import.py [--megabytes 500] [--keep DIR]

The export is generated (realistic shapes: a hidden system root, 6–40 turns of
0.3–3 KB messages, tool calls with their output, and one conversation in
four with a regenerated answer and an edited prompt, i.e. two forks). The
import runs as the real command in a fresh process, so its peak RSS is its
own (``wait4``). Side by side: the floor, ijson's C backend building every
conversation of the same file with nothing else done.

Targets (issue 16): at least 20 MB/s, at most 250 MB peak RSS.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import ijson  # noqa: E402
import orjson  # noqa: E402

from tests.helpers.chatgpt_export import conversation, message  # noqa: E402

TARGET_MB_S = 20.0
TARGET_RSS_MB = 250.0
WORDS = [
    *("branch", "answer", "model", "turn", "context", "export", "import", "stream"),
    *("python", "code", "test", "tree", "result", "fork", "history", "question"),
    *("idea", "plan", "value"),
]


def _text(rng: random.Random, low: int, high: int) -> str:
    size = rng.randint(low, high)
    out = io.StringIO()
    while out.tell() < size:
        out.write(rng.choice(WORDS))
        out.write(" " if rng.random() > 0.1 else ".\n")
    return out.getvalue()


def _conversation(rng: random.Random, n: int) -> dict[str, Any]:
    cid = f"bench-{n:07d}"
    rows: list[tuple[str, str | None, dict[str, Any] | None]] = [
        (f"{cid}-root", None, None),
        (f"{cid}-sys", f"{cid}-root", message("system", "", hidden=True)),
    ]
    parent, t = f"{cid}-sys", 1_700_000_000.0 + n * 100
    branchy = n % 4 == 0
    turns = rng.randint(6, 40)
    for k in range(turns):
        user = f"{cid}-u{k}"
        rows.append((user, parent, message("user", _text(rng, 100, 600), time=t)))
        above = user
        if k % 7 == 3:  # a tool call and its output
            call, out = f"{cid}-c{k}", f"{cid}-o{k}"
            code = {"content_type": "code", "language": "python", "text": _text(rng, 80, 300)}
            rows.append(
                (call, user, message("assistant", content=code, recipient="python", time=t + 1))
            )
            output = {"content_type": "execution_output", "text": _text(rng, 50, 200)}
            rows.append((out, call, message("tool", content=output, name="python", time=t + 2)))
            above = out
        answer = f"{cid}-a{k}"
        rows.append(
            (answer, above, message("assistant", _text(rng, 300, 3000), time=t + 3, model="gpt-4o"))
        )
        if branchy and k == turns // 2:
            rows.append(
                (
                    f"{answer}r",
                    above,
                    message("assistant", _text(rng, 300, 3000), time=t + 4, model="gpt-4o"),
                )
            )
            rows.append((f"{user}e", parent, message("user", _text(rng, 100, 600), time=t + 5)))
            rows.append(
                (
                    f"{answer}e",
                    f"{user}e",
                    message("assistant", _text(rng, 300, 3000), time=t + 6, model="gpt-4o"),
                )
            )
        parent, t = answer, t + 10
    return conversation(
        cid, f"Benchmark {n}", rows, current=parent, create_time=1_700_000_000.0 + n * 100
    )


def build_export(path: Path, megabytes: float, seed: int = 16) -> int:
    """Write a ChatGPT ``conversations.json`` of about ``megabytes``; return its conversations."""
    rng = random.Random(seed)
    limit = int(megabytes * 1_000_000)
    n = 0
    with path.open("wb") as out:
        out.write(b"[")
        while out.tell() < limit or n == 0:
            if n:
                out.write(b",")
            out.write(orjson.dumps(_conversation(rng, n)))
            n += 1
        out.write(b"]")
    return n


def floor_seconds(path: Path) -> float:
    """ijson's C backend building every conversation of the file, nothing else."""
    start = time.perf_counter()
    with path.open("rb") as handle:
        for _ in ijson.items(handle, "item", use_float=True, buf_size=1 << 20):
            pass
    return time.perf_counter() - start


def run_import(path: Path, data: Path) -> tuple[float, tuple[float, float], float, dict[str, Any]]:
    """``branchwise import`` in a fresh process.

    Returns its wall seconds, (user, system) CPU seconds, peak RSS (MB) and report.
    """
    command = [sys.executable, "-m", "branchwise.desktop.entry", "--data-dir", str(data)]
    start = time.perf_counter()
    proc = subprocess.Popen(
        [*command, "import", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    output = proc.stdout.read()
    assert proc.stderr is not None
    errors = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"import failed ({proc.returncode}): {output[-800:]!r} {errors[-2000:]!r}")
    report = orjson.loads(output.strip().splitlines()[-1])
    return seconds, (usage.ru_utime, usage.ru_stime), usage.ru_maxrss / 1024, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=500.0)
    parser.add_argument("--keep", type=Path, help="build the export and data root here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.keep) as folder:
        work = Path(folder)
        export = work / "conversations.json"
        count = build_export(export, args.megabytes)
        size_mb = export.stat().st_size / 1e6
        floor = floor_seconds(export)
        load = os.getloadavg()[0]
        seconds, (user, system), rss, report = run_import(export, work / "data")
        cpu = user + system
        made = sum(1 for c in report["conversations"] if c["created"])
        speed = size_mb / seconds
        print(
            f"export: {size_mb:.1f} MB, {count} conversations -> {made} sessions (forks included)"
        )
        print(
            f"import: {seconds:.2f} s = {speed:.1f} MB/s (target >= {TARGET_MB_S:.0f}); "
            f"floor (ijson items only) {floor:.2f} s = {size_mb / floor:.1f} MB/s; "
            f"ratio {seconds / floor:.2f}"
        )
        print(
            f"CPU time of the import: {cpu:.2f} s (user {user:.2f}, system {system:.2f}) "
            f"= {size_mb / cpu:.1f} MB per CPU second "
            f"(load average {load:.2f} on {os.cpu_count()} cores when it started)"
        )
        print(f"peak RSS of the import process: {rss:.0f} MB (target <= {TARGET_RSS_MB:.0f})")
        again, _, _, second = run_import(export, work / "data")
        new = sum(1 for c in second["conversations"] if c["created"])
        print(f"re-import: {again:.2f} s = {size_mb / again:.1f} MB/s, {new} created")
        ok = speed >= TARGET_MB_S and rss <= TARGET_RSS_MB and new == 0
        print("verdict:", "ok" if ok else "OVER TARGET")


if __name__ == "__main__":
    main()
