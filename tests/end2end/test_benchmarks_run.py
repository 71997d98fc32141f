"""The benchmarks still run: each one, tiny, as the real script (they are not imported by tests).

A benchmark that points at a moved helper or a renamed API would otherwise go
unnoticed until someone needs its numbers. ``bench_desktop`` builds a fixed
10,000-turn session (tens of seconds) and is left to hand runs.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import REPO_ROOT

BENCHMARKS = REPO_ROOT / "tests" / "benchmarks"


@pytest.mark.parametrize(
    ("script", "args", "expect"),
    [
        ("bench_log.py", ["--turns", "40", "--commits", "5"], "ratio"),
        ("bench_fork.py", ["--turns", "40", "--sessions", "30", "--repeat", "1"], "ratio"),
        (
            "bench_segments.py",
            [
                *(
                    "--big",
                    "60",
                    "--small",
                    "10",
                    "--mid",
                    "30",
                    "--disk-turns",
                    "20",
                    "--long",
                    "60",
                ),
                *("--repeat", "1", "--roll-bytes", "4000"),
            ],
            "ratio",
        ),
        ("bench_runtime.py", ["--chunks", "40", "--rounds", "1"], "ratio"),
        ("bench_fanout.py", ["--turns", "40", "--repeat", "1", "--chunks", "20"], "ratio"),
        ("bench_fanout_grid.py", ["--chunks", "20", "--repeat", "1"], "ratio"),
        (
            "bench_snapshot.py",
            ["--big", "60", "--small", "5", "--read-turns", "60", "--runs", "1", "--no-window"],
            "ratio",
        ),
        ("bench_partials.py", ["--kb", "4", "--commits", "20", "--repeat", "1"], "ratio"),
        ("count_branch_click.py", ["--turns", "2"], "fsync"),
        ("bench_render.py", ["--lines", "60", "--runs", "1"], "ratio"),
        ("bench_compare.py", ["--turns", "10", "--runs", "1"], "ratio"),
        ("bench_branch_map.py", ["--branches", "30", "--depth", "40", "--runs", "1"], "ratio"),
        (
            "bench_serve.py",
            ["--turns", "20", "--targets", "10", "--forks", "5", "--retries", "5"]
            + ["--sequential", "3", "--page-turns", "60", "--repeat", "1"],
            "zero errors, one child per operation",
        ),
        ("bench_serve_events.py", ["--turns", "30", "--repeat", "1"], "last 50 turns"),
        ("bench_remote_open.py", ["--turns", "60", "--runs", "1"], "first view"),
        ("bench_sibling_switch.py", ["--turns", "30", "--branches", "20", "--runs", "1"], "ratio"),
        ("bench_import_readers.py", ["--megabytes", "1", "--repeat", "1"], "peak RSS"),
        ("bench_import.py", ["--megabytes", "1"], "peak RSS"),
        (
            "bench_attach_pdf.py",
            ["--pages", "5", "--lines", "5", "--megabytes", "0.5", "--repeat", "1"],
            "one frame at 60 Hz",
        ),
        (
            "bench_labels.py",
            ["--branches", "6", "--turns", "2", "--repeat", "1"],
            "labels computed",
        ),
        (
            "bench_search.py",
            ["--conversations", "20", "--messages", "400", "--queries", "16", "--turns", "5"],
            "alsoIn 10",
        ),
    ],
)
def test_benchmark_runs(script: str, args: list[str], expect: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert expect in done.stdout
