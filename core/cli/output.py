"""Printing JSON results the way every command does (camelCase, one document)."""

from __future__ import annotations

import sys
from typing import Any, TextIO

import orjson


def print_json(value: Any, stream: TextIO | None = None) -> None:
    """Write ``value`` as one line of JSON and flush."""
    out = stream or sys.stdout
    out.write(orjson.dumps(value).decode() + "\n")
    out.flush()
