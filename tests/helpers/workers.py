"""A real writer process for crash tests.

``python workers.py ROOT SESSION_ID N`` appends N commits and prints
``durable <seq>`` after each append returned (i.e. after its fsync), so the
parent knows exactly which commits were reported durable before it SIGKILLs.
``hold`` as N opens the writer, prints ``held`` and waits for stdin to close.
"""

from __future__ import annotations

import sys
from pathlib import Path

from branchwise.core.projection import events as ev
from branchwise.core.store.store import SessionStore


def main() -> None:
    root, session_id, count = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    store = SessionStore(root)
    writer = store.open_writer(session_id)
    if count == "hold":
        print("held", flush=True)
        sys.stdin.read()
        return
    for n in range(int(count)):
        committed = writer.commit([ev.user_message(f"m{n}", "payload " * (n % 50))])
        sys.stdout.write(f"durable {committed[-1]['seq']}\n")
        sys.stdout.flush()
    writer.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
