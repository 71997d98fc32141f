"""Forks a server is asked for at once, made durable together (group commit).

A fork's own cost is a few milliseconds of work; what a burst of forks waits
for is the disk: each fork alone makes its reservation, its child's files and
folders and ``sessions/`` durable one ``fsync`` at a time, and fifty clients
branching at once queue fifty times seven journal commits. Here the forks
that arrive while a group is being made durable wait for it to finish and
then go together as the next group
(:func:`~branchwise.core.fork.engine.fork_together`: one file-system sync and
one folder fsync for all of them). A fork that arrives when nothing is
running goes at once (with any asked in the same moment; alone, it is just
:func:`~branchwise.core.fork.engine.fork`): a lone click waits for nobody.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor

from branchwise.core.fork.engine import ForkCall, ForkResult, fork_together
from branchwise.core.fork.targets import TargetsCache
from branchwise.core.store.store import SessionStore

MOST_IN_A_GROUP = 64
"""Forks made durable together at most; more wait for the next group."""


class ForkGroups:
    """Runs the forks asked of one server in groups, one group at a time, off the event loop.

    Forks of one source share its replay and seed plan in ``cache``.
    """

    def __init__(self, store: SessionStore, cache: TargetsCache) -> None:
        self._store = store
        self._cache = cache
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fork")
        self._waiting: list[tuple[ForkCall, asyncio.Future[ForkResult]]] = []
        self._running: asyncio.Task[None] | None = None

    async def fork(self, call: ForkCall) -> ForkResult:
        """Fork ``call`` with the next group; its result once its child is durable.

        Raises:
            BranchwiseError: the fork's own refusal (see :func:`~branchwise.core.fork.engine.fork`).
        """
        answer: asyncio.Future[ForkResult] = asyncio.get_running_loop().create_future()
        self._waiting.append((call, answer))
        if self._running is None:
            self._running = asyncio.create_task(self._run_groups())
        return await answer

    async def _run_groups(self) -> None:
        loop = asyncio.get_running_loop()
        group: list[tuple[ForkCall, asyncio.Future[ForkResult]]] = []
        try:
            while self._waiting:
                group = self._waiting[:MOST_IN_A_GROUP]
                del self._waiting[:MOST_IN_A_GROUP]
                calls = [call for call, _ in group]
                outcomes: list[ForkResult | Exception]
                try:
                    run = functools.partial(fork_together, self._store, calls, cache=self._cache)
                    outcomes = await loop.run_in_executor(self._pool, run)
                except Exception as exc:  # noqa: BLE001 - every fork of the group hears of it
                    outcomes = [exc] * len(group)
                for (_, answer), outcome in zip(group, outcomes, strict=True):
                    if answer.done():  # its client went away
                        continue
                    if isinstance(outcome, ForkResult):
                        answer.set_result(outcome)
                    else:
                        answer.set_exception(outcome)
        finally:
            self._running = None
            for _, answer in group:  # the server is stopping: no answer is coming
                answer.cancel()

    async def close(self) -> None:
        """Let a group being made durable finish (it publishes whole or not at all); start none.

        Forks still waiting for a group are cancelled: nothing of them was written.
        """
        waiting, self._waiting = self._waiting, []
        for _, answer in waiting:
            answer.cancel()
        await asyncio.to_thread(self._pool.shutdown, wait=True, cancel_futures=True)
