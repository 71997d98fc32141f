"""Bursts of forks of one source against a real ``branchwise serve``: one child per operation.

The first source has no turn index (format 1), so the server checks every
cut from its shared replay; retries of an operation in flight wait for it.
Forks asked at once are made durable together; a server killed while it makes
them leaves whole children only, and retries after its restart make each once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from benchmarks.common import build_session
from helpers.forking import children_per_operation
from helpers.kills import kill_moments
from helpers.serve import serve_process

from branchwise.core.fork.targets import fork_targets
from branchwise.core.store.store import SessionStore


async def _burst(url: str, token: str, bodies: list[dict[str, Any]]) -> list[tuple[int, Any]]:
    """POST every body to ``/fork-session`` at once; ``(status, answer)`` of each."""
    auth = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(base_url=url, headers=auth) as client:

        async def one(body: dict[str, Any]) -> tuple[int, Any]:
            async with client.post("/fork-session", data=orjson.dumps(body)) as reply:
                return reply.status, orjson.loads(await reply.read())

        return list(await asyncio.gather(*(one(body) for body in bodies)))


def test_a_burst_of_forks_and_retries_makes_one_whole_child_per_operation(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = SessionStore(root)
    source = build_session(root, 30)
    answer = fork_targets(store, source)
    last, middle = answer.targets[-1], answer.targets[9]

    def body(op: str, target: Any = last, **more: Any) -> dict[str, Any]:
        return {
            "sourceSessionId": source,
            "turnId": target.turn_id,
            "boundarySequence": target.boundary_sequence,
            "expectedGeneration": answer.generation,
            "operationId": op,
            **more,
        }

    bodies = [body(f"op_{n}") for n in range(12)]
    bodies += [body("op_middle", middle) for _ in range(4)]
    bodies += [body("op_retried") for _ in range(12)]
    bodies += [body("op_retried", title="Another name")]  # not the same body: asks itself
    with serve_process(root) as served:
        replies = asyncio.run(_burst(served.url, served.token, bodies))
        # The same operation for another cut, once the burst made its child.
        ((status, conflict),) = asyncio.run(
            _burst(served.url, served.token, [body("op_retried", middle)])
        )

    assert (status, conflict["error"]["code"]) == (409, "operation_conflict")
    assert Counter(status for status, _ in replies) == {200: len(bodies)}
    retried = {answer["childSessionId"] for _, answer in replies[16:]}
    assert len(retried) == 1
    assert sum(answer["created"] for _, answer in replies[16:]) == 1
    middles = {answer["childSessionId"] for _, answer in replies[12:16]}
    assert len(middles) == 1
    per_operation = children_per_operation(store)
    assert per_operation == Counter(
        {f"op_{n}": 1 for n in range(12)} | {"op_middle": 1, "op_retried": 1}
    )
    for _, answer in replies:
        turns = store.read(answer["childSessionId"]).projection.turns
        assert len(turns) == (10 if answer["childSessionId"] in middles else 30)


async def _burst_until_killed(
    url: str, token: str, bodies: list[dict[str, Any]], pid: int, after: float
) -> None:
    """POST every body at once and SIGKILL the server ``after`` seconds in; answers are lost."""
    auth = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(base_url=url, headers=auth) as client:

        async def one(body: dict[str, Any]) -> None:
            with contextlib.suppress(aiohttp.ClientError):
                async with client.post("/fork-session", data=orjson.dumps(body)) as reply:
                    await reply.read()

        sent = asyncio.gather(*(one(body) for body in bodies))
        await asyncio.sleep(after)
        os.kill(pid, signal.SIGKILL)
        await sent


@pytest.mark.slow
def test_a_server_killed_in_a_burst_leaves_whole_children_and_retries_make_each_once(
    tmp_path: Path,
) -> None:
    """SIGKILL a server at a random moment of a burst of 16 forks, 12 times; retry on restart."""
    rng = random.Random(5)
    root = tmp_path / "root"
    store = SessionStore(root)
    source = build_session(root, 30)
    store.migrate(source)
    answer = fork_targets(store, source)
    last = answer.targets[-1]

    def bodies_of(name: str) -> list[dict[str, Any]]:
        return [
            {
                "sourceSessionId": source,
                "turnId": last.turn_id,
                "boundarySequence": last.boundary_sequence,
                "expectedGeneration": answer.generation,
                "operationId": f"op_{name}_{n}",
            }
            for n in range(16)
        ]

    with serve_process(root) as served:  # a burst's own time on this machine, request to reply
        started = time.perf_counter()
        asyncio.run(_burst(served.url, served.token, bodies_of("timed")))
        # Not past the replies: the children are published before them.
        took = time.perf_counter() - started
    seen = Counter[str]()
    for round_, after in enumerate(kill_moments(rng, took, 12, spread=1.0)):
        bodies = bodies_of(str(round_))
        with serve_process(root) as served:
            asyncio.run(_burst_until_killed(served.url, served.token, bodies, served.pid, after))
        made = children_per_operation(store)
        count = sum(made[body["operationId"]] for body in bodies)
        seen["none" if not count else "all" if count == len(bodies) else "some"] += 1
        assert all(made[body["operationId"]] <= 1 for body in bodies)
        with serve_process(root) as served:  # the restart sweeps what the kill left unpublished
            replies = asyncio.run(_burst(served.url, served.token, bodies))
        assert [status for status, _ in replies] == [200] * len(bodies)
        made = children_per_operation(store)
        assert all(made[body["operationId"]] == 1 for body in bodies)
        for _, reply in replies:
            assert len(store.read(reply["childSessionId"]).projection.turns) == 30
    print(f"{took * 1000:.0f} ms a burst; published before the retry: {dict(seen)}")
    assert seen["none"] and seen["some"] + seen["all"], seen
