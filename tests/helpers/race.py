"""A worker process that forks one source again and again until the source is gone.

``python race.py ROOT SESSION_ID TURN BOUNDARY GENERATION`` prints ``ready``,
then one JSON line per fork: ``{"child": ID}`` for a child published, or
``{"refused": CODE}`` for the first typed refusal, and exits 0 after it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import orjson

from branchwise.core.errors import BranchwiseError
from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.store.store import SessionStore

HELPER = Path(__file__)


def main(argv: list[str]) -> None:
    root, session_id, turn = Path(argv[0]), argv[1], argv[2]
    boundary, generation = int(argv[3]), int(argv[4])
    store = SessionStore(root)
    request = ForkRequest(session_id, turn, boundary, generation)
    print("ready", flush=True)
    n = 0
    while True:
        try:
            result = fork(store, request, f"op-{os.getpid()}-{n}")
        except BranchwiseError as exc:
            print(orjson.dumps({"refused": exc.code}).decode(), flush=True)
            return
        print(orjson.dumps({"child": result.child_session_id}).decode(), flush=True)
        n += 1


if __name__ == "__main__":
    main(sys.argv[1:])
