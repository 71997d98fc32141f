"""Running the real ``branchwise`` command line in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson


def run_cli(root: Path, *args: str, check: bool = True) -> tuple[int, Any]:
    """Run ``branchwise --data-dir root args…``; return the exit code and the last JSON line."""
    proc = subprocess.run(
        [*cli_command(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if check and proc.returncode != 0:
        raise AssertionError(f"branchwise {' '.join(args)} failed: {proc.stdout}{proc.stderr}")
    return proc.returncode, orjson.loads(lines[-1]) if lines else None


def cli_command(root: Path) -> list[str]:
    """The ``branchwise --data-dir root`` command line, for subprocesses a test manages."""
    return [sys.executable, "-m", "branchwise.desktop.entry", "--data-dir", str(root)]


def wait_for_partial_text(store: Any, session_id: str, timeout: float = 30.0) -> Any:
    """Poll the committed log (as a reader) until an answer's partial text is durable.

    Returns that partial message; fails the test at the deadline. The short
    pause between reads keeps the poller from starving the writer under test.
    """
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        messages = store.read(session_id).projection.messages
        partial = next((m for m in messages if m.role == "assistant" and m.partial), None)
        if partial is not None:
            return partial
        time.sleep(0.01)
    raise AssertionError("the runner never committed partial text")
