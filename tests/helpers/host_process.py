"""The app's real host without its window, in a process of its own, for crash tests.

It builds :class:`~branchwise.desktop.host.host.Host` as the app does and
performs one "Branch into a new conversation" click through the host's own
branch path (operations journal, fork, opening and naming the child); the
window's navigator is replaced by a line in ``<root>/open-tabs.txt``
(appended and fsynced, so a shown tab survives a crash the way a real tab's
session state would)::

    python tests/helpers/host_process.py --data-dir D --click SESSION TURN

It takes the app lock, sweeps half-built sessions, runs recovery, then
performs the click, and prints one JSON object per line (``notice``,
``recovered``, ``ready``, ``outcome``). Crash points are injected from
outside, through the host's ``checkpoint`` hook:

- ``BRANCHWISE_CRASH_AT=<point>`` SIGKILLs the process at that point;
- ``--pause-at <point>`` prints ``{"paused": point}`` there and blocks, so a
  test can SIGKILL it while it provably stands at that point;
- ``--wait-go`` prints ``{"ready": true}`` before the click and waits for a
  line on stdin, so a test can time a kill from the click's start.

Points are the names of :class:`~branchwise.desktop.host.backends.CrashPoint`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fs.locks import InstanceLock
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.backends import CrashPoint
from branchwise.desktop.host.branching import BranchOutcome, RecoverySummary
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.notices import Notice, NoticeCenter

CRASH_ENV = "BRANCHWISE_CRASH_AT"
OPEN_TABS = "open-tabs.txt"


def emit(**fields: Any) -> None:
    """One JSON line on stdout, flushed at once (the test reads it live)."""
    sys.stdout.buffer.write(orjson.dumps(fields) + b"\n")
    sys.stdout.buffer.flush()


class CrashInjector:
    """The checkpoint hook: kill or pause the process at a named point.

    Args:
        crash_at: the point where the process SIGKILLs itself.
        pause_at: the point where it announces itself and blocks forever.
    """

    def __init__(self, crash_at: str | None, pause_at: str | None) -> None:
        known = {p.value for p in CrashPoint}
        for point in (crash_at, pause_at):
            if point is not None and point not in known:
                raise SystemExit(f"unknown crash point {point!r}; known: {sorted(known)}")
        self.crash_at = crash_at
        self.pause_at = pause_at

    def __call__(self, point: str) -> None:
        if point == self.crash_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if point == self.pause_at:
            emit(paused=point)
            threading.Event().wait()


class TabRecorder:
    """The navigator: where the window would show a tab, append the session id, durably."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / OPEN_TABS

    async def show(self, session_id: str) -> None:
        """Record that ``session_id``'s tab is shown (the host has opened the session)."""
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, session_id.encode() + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)


def read_open_tabs(root: Path) -> list[str]:
    """The session ids the navigator showed under ``root``, in order (with repeats)."""
    try:
        return (Path(root) / OPEN_TABS).read_text().split()
    except FileNotFoundError:
        return []


def resolve_request(store: SessionStore, session_id: str, turn_id: str) -> ForkRequest:
    """The click for a turn, as the transcript would carry it from the fork targets."""
    snapshot = store.read(session_id)
    turn = snapshot.projection.turn(turn_id)
    if turn is None or turn.boundary_sequence is None:
        raise SystemExit(f"turn {turn_id} has no boundary in {session_id}")
    return ForkRequest(session_id, turn_id, turn.boundary_sequence, snapshot.manifest.generation)


def summary_json(summary: RecoverySummary) -> dict[str, Any]:
    """The recovery summary as JSON."""
    return {
        "count": summary.count,
        "opened": list(summary.opened),
        "stillPending": list(summary.still_pending),
        "refused": [list(pair) for pair in summary.refused],
        "attachFailed": list(summary.attach_failed),
        "dropped": [d.reason for d in summary.dropped],
        "movedAside": str(summary.moved_aside) if summary.moved_aside else None,
    }


def outcome_json(outcome: BranchOutcome) -> dict[str, Any]:
    """A click's outcome as JSON."""
    return {
        "status": outcome.status.value,
        "operationId": outcome.operation_id,
        "childSessionId": outcome.child_session_id,
        "created": outcome.created,
        "reason": outcome.reason,
    }


def _print_notice(notice: Notice) -> None:
    emit(notice=notice.code, level=notice.level.value, params=notice.params)


async def run(args: argparse.Namespace) -> int:
    """Start like the app (lock, sweep, list, recover), then click once if asked."""
    injector = CrashInjector(os.environ.get(CRASH_ENV) or None, args.pause_at)
    root = Path(args.data_dir)
    SessionStore(root)  # creates the data root before it is locked, as the app does
    instance = InstanceLock(root)
    notices = NoticeCenter()
    notices.subscribe(_print_notice)
    host = Host(root, notices=notices, checkpoint=injector)
    host.navigator = TabRecorder(root).show
    try:
        host.start()
        emit(recovered=summary_json(await host.fork_coordinator.recover()))
        if args.click is None:
            return 0
        request = resolve_request(host.store, *args.click)
        if args.wait_go:
            emit(ready=True)
            await asyncio.to_thread(sys.stdin.readline)
        outcome = await host.fork_coordinator.branch(request)
        emit(outcome=outcome_json(outcome))
        return 0 if outcome.opened else 1
    finally:
        await host.shutdown()
        instance.release()


def build_parser() -> argparse.ArgumentParser:
    """The headless host's command line."""
    parser = argparse.ArgumentParser(prog="host_process.py")
    parser.add_argument("--data-dir", required=True, help="the data root")
    parser.add_argument("--click", nargs=2, metavar=("SESSION", "TURN"), help="branch this turn")
    parser.add_argument("--pause-at", metavar="POINT", help="announce and block at this point")
    parser.add_argument("--wait-go", action="store_true", help="wait for a stdin line to click")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    return asyncio.run(run(build_parser().parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
