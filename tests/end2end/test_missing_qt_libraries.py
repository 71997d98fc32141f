"""First start on a machine without Qt's X11 helper libraries: named, with the install command.

The real ``branchwise`` runs in a private mount namespace where the system's
library folder is replaced by a copy (of symlinks) without
``libxcb-cursor.so.0``: the dynamic loader really cannot find it, as on a
fresh Debian machine. Before the fix Qt aborted the process (exit 134) with a
message about the xcb plugin.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HIDDEN = "libxcb-cursor.so.0"

# Runs as root inside ``unshare -m``: hide HIDDEN from every library folder, then exec the command.
HIDE_AND_RUN = r"""
import ctypes, os, subprocess, sys

scratch, hidden, command = sys.argv[1], sys.argv[2], sys.argv[3:]
candidates = [
    "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
    "/lib/aarch64-linux-gnu", "/usr/lib64", "/lib64", "/usr/lib", "/lib",
]
folders = {}
for folder in candidates:
    if os.path.isdir(folder) and any(n.startswith(hidden) for n in os.listdir(folder)):
        folders.setdefault(os.path.realpath(folder), folder)
for n, folder in enumerate(folders):
    real, farm = os.path.join(scratch, f"real{n}"), os.path.join(scratch, f"farm{n}")
    os.makedirs(real)
    os.makedirs(farm)
    subprocess.run(["mount", "--bind", folder, real], check=True)
    for name in os.listdir(real):
        if not name.startswith(hidden):
            os.symlink(os.path.join(real, name), os.path.join(farm, name))
    subprocess.run(["mount", "--bind", farm, folder], check=True)
try:
    ctypes.CDLL(hidden)
except OSError:
    os.execv(command[0], command)
sys.exit(77)  # still found: this machine keeps it somewhere else
"""


def _namespaces_work() -> bool:
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True, check=False
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _namespaces_work(), reason="needs root and mount namespaces (unshare -m)")
def test_first_start_without_libxcb_cursor_names_the_package_and_exits_1(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    root = tmp_path / "data"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE")
    }
    env.update(DISPLAY=":4242", BRANCHWISE_EXIT_AFTER_SHOW="1")
    app = [sys.executable, "-m", "branchwise.desktop.entry", "--data-dir", str(root)]
    done = subprocess.run(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            sys.executable,
            "-c",
            HIDE_AND_RUN,
            str(scratch),
            HIDDEN,
            *app,
            "--lang",
            "en",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    if done.returncode == 77:
        pytest.skip(f"{HIDDEN} could not be hidden on this machine")
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "libxcb-cursor0" in done.stderr
    assert "sudo apt-get install -y libxcb-cursor0" in done.stderr
    assert "sudo dnf install -y xcb-util-cursor" in done.stderr
    assert "Traceback" not in done.stderr and "qt.qpa" not in done.stderr
    assert not root.exists()  # refused before anything was written
