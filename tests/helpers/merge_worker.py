"""A process that brings notes back from a branch in a loop, to be SIGKILLed by a test.

    python merge_worker.py ROOT CHILD START

Prints ``ready``, then ``op K`` before and ``done K`` after each merge of
operation ``merge-K`` (K from START on), flushing each line.
"""

from __future__ import annotations

import sys
from pathlib import Path

from branchwise.core.conversation.merge import merge_back
from branchwise.core.store.store import SessionStore

HELPER = Path(__file__)


def content(number: int) -> str:
    """What operation ``merge-number`` brings back."""
    return f"note {number}: " + "finding " * 40


def main() -> None:
    store = SessionStore(Path(sys.argv[1]))
    child, number = sys.argv[2], int(sys.argv[3])
    print("ready", flush=True)
    while True:
        print(f"op {number}", flush=True)
        merge_back(store, child, None, content(number), "note", f"merge-{number}")
        print(f"done {number}", flush=True)
        number += 1


if __name__ == "__main__":
    main()
