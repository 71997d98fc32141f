"""``branchwise serve`` under load from a client on loopback (issue 17), side by side with
the in-process calls it wraps.

    python tests/benchmarks/bench_serve.py [--turns 2000] [--targets 200] [--forks 50]
        [--retries 50] [--page-turns 10000] [--format 2]

On one ``--turns`` session (``--format 2``: segmented, as every session a
writer has opened is; ``1``: as built, with no turn index) served by a real
``branchwise serve`` subprocess:

(a) ``--targets`` concurrent ``GET /sessions/{id}/fork-targets``;
(b) ``--forks`` concurrent ``POST /fork-session`` at the last turn, distinct
    operation ids, then ``--retries`` concurrent retries of one operation id;
    checked: zero errors, exactly one child per operation id, every retry
    answering the same child. p50/p99 latencies; the p99 fork latency is set
    against the in-process ``fork()`` of the same request (median of 5), and
    so is a sequential remote fork (the per-request overhead without queueing),
    and two floors: ``--forks`` concurrent ``GET /capabilities`` (a route that
    does no work: what HTTP and this load client cost a burst of that size) and
    ``--forks`` in-process forks made durable together, as the server's groups
    are, on a shared ``TargetsCache`` (what the storage costs a burst, no HTTP);
(c) a ``--page-turns`` session: the first transcript page over HTTP
    (``GET /sessions/{id}?limit=50``) and the desktop's remote transcript
    (``RemoteConversation.load``: every commit, then fork targets) vs. the local
    first page (``SessionStore.read`` + the last 50 rows).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import build_session
from helpers.forking import children_per_operation
from helpers.serve import serve_process

from branchwise.core import ForkRequest, SessionStore, fork, fork_targets
from branchwise.core.fork.engine import ForkCall, ForkResult, fork_together
from branchwise.core.fork.targets import TargetsCache
from branchwise.desktop.host.connections import Connection
from branchwise.desktop.host.notices import NoticeCenter
from branchwise.desktop.host.rows import PAGE_SIZE, rows_from_projection
from branchwise.desktop.host.sources import RemoteSource


def percentile(values: list[float], share: float) -> float:
    """The ``share`` (0..1) percentile, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def line(name: str, latencies: list[float], errors: int) -> None:
    """Print one load result."""
    print(
        f"{name:<44} n {len(latencies):4d}  errors {errors}  "
        f"p50 {percentile(latencies, 0.5) * 1000:8.2f} ms  "
        f"p99 {percentile(latencies, 0.99) * 1000:8.2f} ms"
    )


async def timed(client: aiohttp.ClientSession, method: str, path: str, **kwargs: Any) -> tuple:
    """``(seconds, status, body)`` of one request."""
    start = time.perf_counter()
    async with client.request(method, path, **kwargs) as reply:
        body = await reply.read()
    return time.perf_counter() - start, reply.status, body


async def load(url: str, token: str, session_id: str, request: ForkRequest, args: Any) -> dict:
    """Run (a) and (b) against the server; the latencies, statuses and answers.

    The load client is one ``aiohttp`` session with a connection per request
    in flight, standing for that many clients. (``httpx``'s async client, the
    desktop's, spends 100-450 ms of this machine's two cores on a burst of 50
    requests that need the server for 5 ms: it measured itself, not the server.)
    """
    most = max(args.targets, args.forks, args.retries)
    auth = {"Authorization": f"Bearer {token}"}
    connector = aiohttp.TCPConnector(limit=most)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(
        base_url=url, headers=auth, connector=connector, timeout=timeout
    ) as client:
        headers = {"X-Expected-Session": session_id}
        targets = await asyncio.gather(
            *(
                timed(client, "GET", f"/sessions/{session_id}/fork-targets", headers=headers)
                for _ in range(args.targets)
            )
        )

        def body(op: str) -> bytes:
            return orjson.dumps(
                {
                    "sourceSessionId": request.source_session_id,
                    "turnId": request.turn_id,
                    "boundarySequence": request.boundary_sequence,
                    "expectedGeneration": request.expected_generation,
                    "operationId": op,
                }
            )

        no_work = await asyncio.gather(
            *(timed(client, "GET", "/capabilities") for _ in range(args.forks))
        )
        forks = await asyncio.gather(
            *(
                timed(client, "POST", "/fork-session", data=body(f"op_bench_{n}"))
                for n in range(args.forks)
            )
        )
        retries = await asyncio.gather(
            *(
                timed(client, "POST", "/fork-session", data=body("op_bench_retry"))
                for _ in range(args.retries)
            )
        )
        sequential = [
            await timed(client, "POST", "/fork-session", data=body(f"op_bench_seq_{n}"))
            for n in range(args.sequential)
        ]
    return {
        "targets": targets,
        "no-op": no_work,
        "forks": forks,
        "retries": retries,
        "sequential": sequential,
    }


def in_process_fork(root: Path, request: ForkRequest, runs: int = 5) -> float:
    """Median in-process ``fork()`` time of the same request (fresh operation ids)."""
    store = SessionStore(root)
    times = []
    for n in range(runs):
        start = time.perf_counter()
        fork(store, request, f"op_inprocess_{n}")
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def in_process_burst(root: Path, request: ForkRequest, count: int) -> float:
    """Seconds ``count`` in-process forks take made durable together, as the server's groups.

    The server's floor with no HTTP: the same shared cache and one
    ``fork_together`` call; every fork of the group answers at its end, so
    this is also the group's p99.
    """
    store, cache = SessionStore(root), TargetsCache()
    fork(store, request, "op_burst_warm", cache=cache)
    calls = [ForkCall(request, f"op_burst_{n}") for n in range(count)]
    start = time.perf_counter()
    outcomes = fork_together(store, calls, cache=cache)
    took = time.perf_counter() - start
    assert all(isinstance(outcome, ForkResult) for outcome in outcomes), outcomes
    return took


def first_page(root: Path, url: str, token: str, session_id: str, repeat: int) -> None:
    """(c): the first transcript page over HTTP and in the desktop vs. a local one."""
    store = SessionStore(root)

    def local() -> None:
        rows = rows_from_projection(store.read(session_id).projection)
        assert len(rows[-PAGE_SIZE:]) == PAGE_SIZE

    def paged() -> None:
        reply = httpx.get(
            f"{url}/sessions/{session_id}",
            params={"limit": PAGE_SIZE},
            headers={"Authorization": f"Bearer {token}"},
            timeout=600,
        )
        assert len(reply.json()["turns"]) == PAGE_SIZE

    async def desktop() -> None:
        with tempfile.TemporaryDirectory() as here:
            server = RemoteSource(Path(here), Connection("bench", url), token, NoticeCenter())
            conversation = await server.open_conversation(session_id)
            assert len(conversation.rows[-PAGE_SIZE:]) == PAGE_SIZE

    times: dict[str, list[float]] = {"local": [], "paged": [], "desktop": []}
    for _ in range(repeat):
        for name, call in (
            ("local", local),
            ("paged", paged),
            ("desktop", lambda: asyncio.run(desktop())),
        ):
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    best = {name: min(values) for name, values in times.items()}
    for name in ("paged", "desktop"):
        ratio = best[name] / best["local"]
        verdict = "ok" if ratio <= 3 else "OVER TARGET"
        print(
            f"first page, {name:<8} {best[name] * 1000:9.2f} ms  local {best['local'] * 1000:9.2f}"
            f" ms  ratio {ratio:5.2f} (target <= 3)  {verdict}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--targets", type=int, default=200)
    parser.add_argument("--forks", type=int, default=50)
    parser.add_argument("--retries", type=int, default=50)
    parser.add_argument("--sequential", type=int, default=20)
    parser.add_argument("--page-turns", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--format",
        type=int,
        choices=(1, 2),
        default=2,
        help="2: the forked session is segmented, as any session a writer opened is;"
        " 1: left as built (no turn index: every fork replays it)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        store = SessionStore(root)
        session_id = build_session(root, args.turns)
        if args.format == 2:
            store.migrate(session_id)
        answer = fork_targets(store, session_id)
        last = answer.targets[-1]
        assert last.boundary_sequence is not None
        request = ForkRequest(session_id, last.turn_id, last.boundary_sequence, answer.generation)
        big = build_session(root, args.page_turns, "long")
        with serve_process(root) as served:
            results = asyncio.run(load(served.url, served.token, session_id, request, args))
            inprocess = in_process_fork(root, request)
            burst = in_process_burst(root, request, args.forks)
            first_page(root, served.url, served.token, big, args.repeat)
        errors = {
            name: sum(1 for _, status, _ in replies if status != 200)
            for name, replies in results.items()
        }
        for name, replies in results.items():
            line(f"{name} ({len(replies)} requests)", [r[0] for r in replies], errors[name])
        per_op = children_per_operation(SessionStore(root))
        lost = [n for n in range(args.forks) if per_op[f"op_bench_{n}"] != 1]
        retry_children = {orjson.loads(body)["childSessionId"] for _, _, body in results["retries"]}
        duplicates = {op: count for op, count in per_op.items() if count != 1}
        print(
            f"children: {sum(per_op.values())}  lost or duplicated: {len(lost)}  "
            f"retry answers: {len(retry_children)} child(ren)  duplicates: {duplicates}"
        )
        p99_fork = percentile([r[0] for r in results["forks"]], 0.99)
        p99_seq = percentile([r[0] for r in results["sequential"]], 0.99)
        p99_none = percentile([r[0] for r in results["no-op"]], 0.99)
        for name, value in (
            ("p99 of concurrent forks", p99_fork),
            ("p99 sequential", p99_seq),
            ("p99 of concurrent no-ops", p99_none),
            ("p99 in-process burst", burst),
        ):
            ratio = value / inprocess
            verdict = "ok" if ratio <= 3 else "OVER TARGET"
            if name.endswith("no-ops"):
                verdict = "(a floor: HTTP and the client, no work)"
            elif name.endswith("burst"):
                verdict = "(a floor: the same forks at once in-process, no HTTP)"
            print(
                f"{name:<26} {value * 1000:9.2f} ms  in-process fork {inprocess * 1000:8.2f} ms"
                f"  ratio {ratio:6.2f} (target <= 3)  {verdict}"
            )
        ok = not any(errors.values()) and not lost and len(retry_children) == 1 and not duplicates
        print("zero errors, one child per operation" if ok else "FAILED: errors or lost children")
        if not ok:
            sys.exit(1)


if __name__ == "__main__":
    main()
