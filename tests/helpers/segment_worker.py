"""A real second process for the segmented-log crash sweeps (killed with SIGKILL).

``python segment_worker.py roll ROOT SESSION_ID ROLL_BYTES``
    opens the writer with a small segment size, prints ``ready``, then commits
    turns ``w0``, ``w1``… forever (rolling every few turns), printing
    ``done <turn>`` after each.
``python segment_worker.py migrate ROOT SESSION_ID``
    prints ``ready``, migrates the (format 1) session, prints ``done``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branchwise.core.store.store import SessionStore  # noqa: E402
from helpers.sessions import complete_turn  # noqa: E402

HELPER = Path(__file__)


def main(argv: list[str]) -> None:
    command, root, session_id = argv[0], Path(argv[1]), argv[2]
    if command == "roll":
        store = SessionStore(root, roll_bytes=int(argv[3]))
        with store.open_writer(session_id) as writer:
            print("ready", flush=True)
            number = 0
            while True:
                complete_turn(writer, f"w{number}", "words " * 30)
                print(f"done w{number}", flush=True)
                number += 1
    elif command == "migrate":
        store = SessionStore(root)
        print("ready", flush=True)
        store.migrate(session_id)
        print("done", flush=True)
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main(sys.argv[1:])
