"""Counting the durable writes and log reads of one branch click, or one streamed turn.

Both run through the real desktop :class:`~branchwise.desktop.host.host.Host`,
headless, with the demo provider: a conversation with some finished turns is
opened, then only the step itself is counted. The counted functions are
wrapped where their callers look them up, for as long as :func:`counting`
holds, and count only inside :meth:`Counts.measuring`:

- ``fsync``: every ``os.fsync`` (log commits, manifests, journal, folders);
- ``replay``: ``Projection.replay`` calls (a whole log turned into a projection);
- ``scan``: ``scan_bytes`` calls (a whole log read and verified for a writer or reader);
- ``fork replay``: a fork's replay of the source (0 when the turn index answered);
- ``writer open``: ``SessionStore.open_writer`` calls (lease, scan, replay);
- ``commits``: log appends (one fsync each).

Shared by ``tests/benchmarks/count_branch_click.py`` and the test that holds
the counts down.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from branchwise.core.fork import engine
from branchwise.core.log import scan as log_scan
from branchwise.core.log import writer as log_writer
from branchwise.core.projection.projection import Projection
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.session import OpenSession

COUNTED = ("fsync", "scan", "replay", "fork replay", "writer open", "commits")


class Counts:
    """What the wrapped functions were called for, while :meth:`measuring`."""

    def __init__(self) -> None:
        self.counter: Counter[str] = Counter()
        self._active = False

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        """``function``, counted under ``name`` while measuring."""

        def counted(*args: Any, **kwargs: Any) -> Any:
            if self._active:
                self.counter[name] += 1
            return function(*args, **kwargs)

        return counted

    @contextmanager
    def measuring(self) -> Iterator[Counter[str]]:
        """Count from zero for the block only; the counter is read after it."""
        self.counter = Counter()
        self._active = True
        try:
            yield self.counter
        finally:
            self._active = False

    def as_dict(self) -> dict[str, int]:
        """Every counted name (0 when not called), in :data:`COUNTED` order."""
        return {name: self.counter[name] for name in COUNTED}


@contextmanager
def counting() -> Iterator[Counts]:
    """Wrap the counted functions for the block; everything is restored after it."""
    counts = Counts()
    with pytest.MonkeyPatch.context() as patch:
        fsync = counts.wrap("fsync", os.fsync)
        patch.setattr(os, "fsync", fsync)
        patch.setattr(log_writer._OsFileOps, "fsync", staticmethod(fsync))
        replay = Projection.replay.__func__  # type: ignore[attr-defined]
        patch.setattr(Projection, "replay", classmethod(counts.wrap("replay", replay)))
        patch.setattr(log_scan, "scan_bytes", counts.wrap("scan", log_scan.scan_bytes))
        patch.setattr(engine, "_replay_to", counts.wrap("fork replay", engine._replay_to))
        open_writer = counts.wrap("writer open", SessionStore.open_writer)
        patch.setattr(SessionStore, "open_writer", open_writer)
        append = counts.wrap("commits", log_writer.LogWriter.append)
        patch.setattr(log_writer.LogWriter, "append", append)
        yield counts


async def _seeded(root: Path, turns: int) -> tuple[Host, OpenSession, list[str]]:
    """A started host with one conversation of ``turns`` finished turns, nothing in flight.

    Returns the host, the conversation, and the list its navigator appends
    every opened conversation to.
    """
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
    await host.search_idle()
    return host, session, opened


async def count_branch_click(root: Path, turns: int, counts: Counts) -> tuple[str, dict[str, int]]:
    """Branch the first of ``turns`` turns and open the child's tab; count only that.

    Returns the child's title and the counts.
    """
    host, session, opened = await _seeded(root, turns)
    try:
        target = host.branch_state(session.session_id, session.rows[0]).target
        assert target is not None
        with counts.measuring():
            child = await host.request_branch(target)
            assert child is not None and opened == [child]
            child_session = host.session(child)
            assert child_session is not None
            await child_session.wait_loaded()
        return host.title(child), counts.as_dict()
    finally:
        await host.shutdown()


async def count_streamed_turn(root: Path, turns: int, counts: Counts) -> dict[str, int]:
    """Stream one more turn into a conversation of ``turns`` turns; count only that."""
    host, session, _opened = await _seeded(root, turns)
    try:
        with counts.measuring():
            await host.send(session.session_id, "one more question")
        return counts.as_dict()
    finally:
        await host.shutdown()
