"""Type-check ``core/`` and ``desktop/`` under their installed names, ``branchwise.*``.

``pyproject.toml`` maps ``branchwise.core`` to ``core/`` and ``branchwise.desktop``
to ``desktop/`` (setuptools' ``package-dir``). An editable install serves that
mapping through an import hook that mypy cannot follow, and ``mypy core desktop``
names the modules ``core.*`` and ``desktop.*``, so every ``from branchwise.core
import …`` in the sources would be a module mypy cannot find.

The options weighed:

- ``editable_mode=strict`` builds a link tree under ``build/`` that a ``.pth``
  file points to, but mypy treats anything found through site-packages as an
  installed library: without a ``py.typed`` marker it is skipped, and with one
  its errors are not reported. The tree also misses files added after install.
- A link tree committed to the repository breaks on checkouts without symlinks
  and duplicates every module under a second name.
- This script: a throwaway ``branchwise/`` folder of links to the real source
  folders, checked with ``-p``, so every module is checked once, under its real
  name, from a fresh clone, with nothing to install first beyond the dev extra.

It runs mypy from the link tree's parent so the reported paths (and mypy's
cache keys) are ``branchwise/core/…``; they are printed back as ``core/…`` so
editors can jump to them. The mypy settings stay in ``pyproject.toml``.

Usage: ``python tools/typecheck.py [extra mypy options]``; exit status is mypy's.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The source folders of the distribution, by their name inside ``branchwise``
# (pyproject.toml's package-dir); locales is data, linked so the tree is whole.
SOURCE_DIRS = ("core", "desktop", "locales")
CHECKED = ("branchwise.core", "branchwise.desktop")


def link_tree(parent: Path) -> Path:
    """Link ``parent/branchwise/<dir>`` to ``ROOT/<dir>``; return the ``branchwise`` folder."""
    package = parent / "branchwise"
    package.mkdir()
    for name in SOURCE_DIRS:
        (package / name).symlink_to(ROOT / name, target_is_directory=True)
    return package


def repo_paths(report: str) -> str:
    """Rewrite mypy's ``branchwise/<dir>/…`` paths to the repository's ``<dir>/…``."""
    for name in SOURCE_DIRS:
        report = report.replace(f"branchwise/{name}/", f"{name}/")
    return report


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="branchwise-typecheck-") as folder:
        link_tree(Path(folder))
        # mypy resolves ``-p`` against its search path, which starts at the
        # working directory: the link tree's parent.
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "mypy",
                "--config-file",
                str(ROOT / "pyproject.toml"),
                "--cache-dir",
                str(ROOT / ".mypy_cache"),
                *(arg for package in CHECKED for arg in ("-p", package)),
                *argv,
            ],
            cwd=folder,
            capture_output=True,
            text=True,
            check=False,
        )
    sys.stdout.write(repo_paths(run.stdout))
    sys.stderr.write(repo_paths(run.stderr))
    return run.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
