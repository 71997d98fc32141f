"""Count the durable writes and log reads of ONE branch click through the real ``Host``.

    python tests/benchmarks/count_branch_click.py [--turns 3]

Headless (no Qt): a conversation with ``--turns`` finished turns is opened,
then its first turn is branched with ``Host.request_branch`` and the child's
tab is "opened" by a navigator that records it. Only the click is counted:

- ``fsync``: every ``os.fsync`` (log commits, manifests, journal, folders);
- ``replay``: ``Projection.replay`` calls (a whole log turned into a projection);
- ``scan``: ``scan_log`` calls (a whole log read and verified for a writer or reader);
- ``fork replay``: a fork's replay of the source (0 when the turn index answered);
- ``writer open``: ``SessionStore.open_writer`` calls (lease, scan, replay);
- ``commits``: log appends (one fsync each).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from branchwise.core.fork import engine
from branchwise.core.log import scan as log_scan
from branchwise.core.log import writer as log_writer
from branchwise.core.projection.projection import Projection
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.store import store as store_module
from branchwise.desktop.host.host import Host


class Counts:
    """Wraps the functions counted; ``counting`` switches them on for the click only."""

    def __init__(self) -> None:
        self.counter: Counter[str] = Counter()
        self.counting = False

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if self.counting:
                self.counter[name] += 1
            return function(*args, **kwargs)

        return counted


def install(counts: Counts) -> None:
    """Patch the counted functions where their callers look them up."""
    fsync = counts.wrap("fsync", os.fsync)
    os.fsync = fsync
    log_writer._OsFileOps.fsync = staticmethod(fsync)  # type: ignore[method-assign]
    replay = Projection.replay.__func__  # type: ignore[attr-defined]
    Projection.replay = classmethod(counts.wrap("replay", replay))  # type: ignore[method-assign,assignment]
    log_scan.scan_bytes = counts.wrap("scan", log_scan.scan_bytes)  # what every reader calls
    engine._replay_to = counts.wrap("fork replay", engine._replay_to)  # index could not answer
    store_cls = store_module.SessionStore
    store_cls.open_writer = counts.wrap("writer open", store_cls.open_writer)  # type: ignore[method-assign]
    log_cls = log_writer.LogWriter
    log_cls.append = counts.wrap("commits", log_cls.append)  # type: ignore[method-assign]


async def click(root: Path, turns: int, counts: Counts) -> dict[str, Any]:
    """Seed a conversation, then count one branch click on its first turn."""
    host = Host(root, provider_factory=lambda _settings: DemoProvider(delay=0.0))
    host.start()
    opened: list[str] = []

    async def navigate(session_id: str) -> None:
        opened.append(session_id)

    host.navigator = navigate
    session = host.create_session()
    for n in range(turns):
        await host.send(session.session_id, f"question {n}")
    await host.fork_coordinator.recover()  # loads the (empty) journal outside the count
    row = session.rows[0]
    target = host.branch_state(session.session_id, row).target
    assert target is not None
    counts.counting = True
    child = await host.request_branch(target)
    assert child is not None and opened == [child]
    child_session = host.session(child)
    assert child_session is not None
    await child_session.wait_loaded()
    counts.counting = False
    title = host.title(child)
    await host.shutdown()
    names = ("fsync", "scan", "replay", "fork replay", "writer open", "commits")
    return {"child title": title, **{name: counts.counter[name] for name in names}}


def main() -> None:
    """Print the counts of one click."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args()
    counts = Counts()
    install(counts)
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(click(Path(tmp), args.turns, counts))
    for name, value in result.items():
        print(f"{name:>12}: {value}")


if __name__ == "__main__":
    main()
