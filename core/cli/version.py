"""The version of Branchwise that is running (``branchwise --version``, ``doctor``)."""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def branchwise_version() -> str:
    """The installed package's version, else the one in the source tree's ``pyproject.toml``."""
    try:
        return version("branchwise")
    except PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"
