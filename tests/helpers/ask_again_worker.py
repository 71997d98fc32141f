"""A process that edits and regenerates turns through the real CLI code, until it is killed.

``python ask_again_worker.py ROOT SESSION TURN`` prints ``ready``, then for
each operation ``op OP`` before it starts and ``done OP`` once the command
returned; even operations edit ``TURN`` (prompt ``edited for OP``), odd ones
regenerate it. The crash sweep SIGKILLs it anywhere in between.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys


def main(argv: list[str]) -> None:
    from branchwise.core.cli.main import main as cli

    root, session_id, turn = argv
    print("ready", flush=True)
    n = 0
    while True:
        op = f"op-{os.getpid()}-{n}"
        action = (
            ["edit", session_id, "--turn", turn, f"edited for {op}"]
            if n % 2 == 0
            else ["regenerate", session_id, "--turn", turn]
        )
        print(f"op {op}", flush=True)
        with contextlib.redirect_stdout(io.StringIO()):
            status = cli(
                ["--data-dir", root, "session", *action, "--operation-id", op, "--quiet"]
                + ["--delay-ms", "1"]
            )
        print(f"done {op} {status}", flush=True)
        n += 1


if __name__ == "__main__":
    main(sys.argv[1:])
