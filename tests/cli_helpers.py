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
        [sys.executable, "-m", "branchwise.desktop.entry", "--data-dir", str(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if check and proc.returncode != 0:
        raise AssertionError(f"branchwise {' '.join(args)} failed: {proc.stdout}{proc.stderr}")
    return proc.returncode, orjson.loads(lines[-1]) if lines else None
