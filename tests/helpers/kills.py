"""Kill moments fitted to how long the killed work takes on the machine running the sweep.

A crash sweep that sleeps a fixed time before its SIGKILL covers the middle of
the work only on a machine as fast as the one it was written on: CI's slower
disk once made 112 of 120 kills land before a group of forks had published
anything. So a sweep first times its work uninterrupted, here, and draws every
kill moment across that time (a little beyond it, so the end is covered too).
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

SPREAD = 1.3  # kill moments reach a little past the timed work: its end is hit too


def kill_fractions(rng: random.Random, count: int, spread: float = SPREAD) -> list[float]:
    """Where each of ``count`` kills lands, as fractions of the work's time (0 to ``spread``).

    One fraction is drawn in each of ``count`` equal slices, and they come in
    random order: the start and the end of the work are both hit whatever the
    draw, which uniform draws leave to luck.
    """
    fractions = [(n + rng.random()) * spread / count for n in range(count)]
    rng.shuffle(fractions)
    return fractions


def kill_moments(
    rng: random.Random, took: float, count: int, spread: float = SPREAD
) -> list[float]:
    """Seconds to wait before each of ``count`` kills of work that took ``took`` seconds."""
    return [fraction * took for fraction in kill_fractions(rng, count, spread)]


@dataclass(frozen=True)
class Forked:
    """A forked child of the test process, running one piece of work and then exiting."""

    pid: int
    reports: int  # the read end of the child's pipe: "r", then the work's duration

    def kill(self) -> None:
        """SIGKILL the child (finished or not) and reap it."""
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.reports)

    def wait(self) -> float:
        """Reap the child; how long its work took, timed inside it (its exit is not work)."""
        with os.fdopen(self.reports, "rb") as reports:
            took = reports.read()
        _, status = os.waitpid(self.pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        return float(took)


def start_forked(work: Callable[[], object]) -> Forked:
    """Fork a child that runs ``work``; return once it is about to start.

    What earlier steps left unwritten is flushed first: a ``syncfs`` in the
    work would wait for it, by however much there is, and the work's timing
    would not foretell its killed runs.
    """
    os.sync()
    reports, child_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        status = 1
        try:
            os.close(reports)
            os.write(child_end, b"r")
            started = time.perf_counter()
            work()
            os.write(child_end, repr(time.perf_counter() - started).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(child_end)
    assert os.read(reports, 1) == b"r"
    return Forked(pid, reports)


def time_forked(works: list[Callable[[], object]]) -> float:
    """The median duration of these pieces of work, each run uninterrupted in its own child."""
    return statistics.median(start_forked(work).wait() for work in works)


def start_worker(args: list[str]) -> subprocess.Popen[str]:
    """Start a worker process (text lines on stdout); return once it printed ``ready``.

    Unwritten data is flushed first, as for :func:`start_forked`.
    """
    os.sync()
    worker = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert worker.stdout is not None
    assert worker.stdout.readline() == "ready\n"
    return worker


def time_worker(args: list[str], *, until: str) -> float:
    """How long a worker takes from its ``ready`` line to its first line starting ``until``."""
    with start_worker(args) as worker:
        assert worker.stdout is not None
        started = time.perf_counter()
        for line in worker.stdout:
            if line.startswith(until):
                took = time.perf_counter() - started
                break
        else:
            raise AssertionError(f"the worker {args} ended before {until!r}")
        worker.kill()
    return took
