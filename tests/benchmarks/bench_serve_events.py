"""What a following desktop's poll of ``GET /sessions/{id}/events`` costs ``branchwise serve``.

    python tests/benchmarks/bench_serve_events.py [--turns 2000 10000] [--repeat 30]

For each ``--turns`` session (segmented, as any session a writer opened is),
served by a real ``branchwise serve`` subprocess, the best of ``--repeat``
sequential requests from one client on loopback:

* ``near the end``: ``after`` = the seq before the last turn (what a desktop
  following the conversation asks after each commit: one turn's commits);
* ``at the end``: ``after`` = the last seq (nothing new; ``wait=0``);
* ``from the start``: ``after=0`` (every commit, the old way to open it);
* ``last 50 turns``: ``lastTurns=50`` (a big conversation's last page first),
  when the server advertises ``session-events-last-turns-v1``.

The first request of each session is left out of the best (it fills the
server's per-session replay) and shown on its own.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import build_session
from helpers.serve import serve_process

from branchwise.core import SessionStore


def best(client: httpx.Client, path: str, params: dict[str, int], repeat: int) -> float:
    """The fastest of ``repeat`` requests, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        reply = client.get(path, params=params)
        times.append(time.perf_counter() - start)
        assert reply.status_code == 200, reply.text
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[2000, 10_000])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        store = SessionStore(root)
        sessions = []
        for turns in args.turns:
            session_id = build_session(root, turns, f"{turns} turns")
            store.migrate(session_id)
            projection = store.read(session_id).projection
            last = projection.turns[-1]
            sessions.append((turns, session_id, last.start_seq - 1, projection.last_seq))
        with serve_process(root) as served:
            headers = {"Authorization": f"Bearer {served.token}"}
            with httpx.Client(base_url=served.url, headers=headers, timeout=600) as client:
                capabilities = client.get("/capabilities").json()["capabilities"]
                last_turns = "session-events-last-turns-v1" in capabilities
                for turns, session_id, before_last, last_seq in sessions:
                    path = f"/sessions/{session_id}/events"
                    start = time.perf_counter()
                    client.get(path, params={"after": before_last, "wait": 0})
                    first = time.perf_counter() - start
                    cases = {
                        "near the end": {"after": before_last, "wait": 0},
                        "at the end": {"after": last_seq, "wait": 0},
                        "from the start": {"after": 0, "wait": 0},
                    }
                    if last_turns:
                        cases["last 50 turns"] = {"lastTurns": 50}
                    print(f"{turns} turns: first request {first * 1000:8.2f} ms")
                    for name, params in cases.items():
                        took = best(client, path, params, args.repeat)
                        print(f"  {name:<16} {took * 1000:8.2f} ms")


if __name__ == "__main__":
    main()
