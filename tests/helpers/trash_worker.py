"""A worker process that moves sessions in and out of the Trash until it is killed.

``python trash_worker.py ROOT ID…`` prints ``ready``, then trashes and
restores each session in turn, forever (a crash sweep SIGKILLs it at random).
"""

from __future__ import annotations

import sys
from pathlib import Path

from branchwise.core.store.store import SessionStore
from branchwise.core.store.trash import Trash

HELPER = Path(__file__)


def main(argv: list[str]) -> None:
    store = SessionStore(Path(argv[0]))
    trash = Trash(store)
    print("ready", flush=True)
    while True:
        for session_id in argv[1:]:
            if store.exists(session_id):
                trash.trash(session_id)
            else:
                trash.restore(session_id)


if __name__ == "__main__":
    main(sys.argv[1:])
