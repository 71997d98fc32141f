"""How long a server conversation takes to show, through the desktop's host, from a real serve.

    python tests/benchmarks/bench_remote_open.py [--turns 2000 10000] [--runs 5]

For each ``--turns`` session (segmented, as any session a writer opened is),
served by a real ``branchwise serve`` subprocess on 127.0.0.1, a fresh
:class:`~branchwise.desktop.host.host.Host` connects and opens it with
``Host.open(ref)``; the median of ``--runs`` opens (after one that fills the
server's per-session replay) of:

* ``first view``: until the conversation has its rows and the last row's
  Branch action can be clicked (what the tab shows first);
* ``whole history``: until every turn's row is there (a server with
  ``session-events-last-turns-v1`` sends the rest when the tab scrolls up to
  it: :meth:`~branchwise.desktop.host.host.Host.load_earlier`, asked at once here).

No Qt: the host is what the tab asks, and the tab's own first paint is
measured by ``bench_desktop.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import build_session
from helpers.serve import serve_process

from branchwise.core import SessionStore
from branchwise.desktop.host.connections import Connection
from branchwise.desktop.host.conversation import ConversationRef
from branchwise.desktop.host.host import Host

POLL = 0.002
"""Seconds between looks at the conversation while its history arrives."""


async def open_once(
    root: Path, url: str, token: str, session_id: str, turns: int
) -> tuple[float, float]:
    """One fresh host's open of the conversation: (first view, whole history) in seconds."""
    host = Host(root)
    server = host.servers.add(Connection("bench", url), token)
    try:
        while not server.connected:
            await asyncio.sleep(POLL)
        ref = ConversationRef(session_id, url)
        start = time.perf_counter()
        conversation = await host.open(ref)
        while not (conversation.rows and host.branch_state_at(ref, conversation.rows[-1]).enabled):
            await asyncio.sleep(POLL)
        first = time.perf_counter() - start
        earlier = getattr(host, "load_earlier", None)  # a build before it read it all at once
        if earlier is not None:
            await earlier(ref)  # what scrolling up asks (nothing when it is all there)
        while len(conversation.rows) < turns:
            await asyncio.sleep(POLL)
        whole = time.perf_counter() - start
    finally:
        await host.shutdown()
        # Let the cancelled long-polls close their connections, or the server waits for them.
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        await asyncio.gather(*others, return_exceptions=True)
    return first, whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[2000, 10_000])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        served_root = Path(tmp) / "served"
        store = SessionStore(served_root)
        sessions = []
        for turns in args.turns:
            session_id = build_session(served_root, turns, f"{turns} turns")
            store.migrate(session_id)
            sessions.append((turns, session_id))
        process: subprocess.Popen[str] | None = None
        try:
            with serve_process(served_root) as served:
                process = served.process
                for turns, session_id in sessions:
                    times = []
                    for run in range(args.runs + 1):
                        desktop_root = Path(tmp) / f"desktop-{turns}-{run}"
                        took = asyncio.run(
                            open_once(desktop_root, served.url, served.token, session_id, turns)
                        )
                        if run:
                            times.append(took)
                    first = statistics.median(t[0] for t in times)
                    whole = statistics.median(t[1] for t in times)
                    print(
                        f"{turns} turns: first view {first * 1000:8.1f} ms"
                        f"  whole history {whole * 1000:8.1f} ms  (median of {args.runs})"
                    )
        except subprocess.TimeoutExpired:
            # The server was slow to stop on a busy machine: the figures above stand.
            if process is not None:
                process.kill()
                process.wait()


if __name__ == "__main__":
    main()
