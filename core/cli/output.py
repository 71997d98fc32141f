"""Printing JSON results the way every command does (camelCase, one document)."""

from __future__ import annotations

import sys
from typing import Any, TextIO

import orjson

_INT64 = range(-(2**63), 2**64)  # what orjson can write: signed 64 bits and unsigned 64 bits


def print_json(value: Any, stream: TextIO | None = None) -> None:
    """Write ``value`` as one line of JSON and flush.

    Printing never fails on the data itself: text that is not UTF-8 (an
    undecodable byte from the command line or the environment) is written
    with ``\\xNN`` escapes and a number JSON cannot hold as its digits, so an
    error about such a value can still be reported.
    """
    out = stream or sys.stdout
    try:
        line = orjson.dumps(value)
    except TypeError:
        line = orjson.dumps(_printable_json(value))
    out.write(line.decode() + "\n")
    out.flush()


def printable(text: str) -> str:
    """``text`` with what is not UTF-8 shown as escapes (``\\xff`` for an undecodable byte)."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that did not come from a byte
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _printable_json(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        return value if value in _INT64 else str(value)
    if isinstance(value, dict):
        return {printable(str(key)): _printable_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_printable_json(item) for item in value]
    return printable(str(value))
