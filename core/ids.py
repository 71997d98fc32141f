"""Identifiers: generation and strict validation.

Session ids name folders, so every entry point validates them before building a
path: only ``[0-9a-z-]`` of length 8 to 64, never starting with ``-`` or ``.``.
Generated ids are UUIDv7-shaped so they sort by creation time.
"""

from __future__ import annotations

import os
import re
import time
import uuid

from branchwise.core.errors import InvalidSessionId

_SESSION_ID = re.compile(r"[0-9a-z][0-9a-z-]{7,63}")


def validate_session_id(value: object) -> str:
    """Return ``value`` if it is a well-formed session id, else raise.

    Raises:
        InvalidSessionId: for non-strings, empty, overlong, path-like or
            otherwise malformed ids.
    """
    if not isinstance(value, str) or not _SESSION_ID.fullmatch(value):
        shown = value if isinstance(value, str) and len(value) <= 80 else type(value).__name__
        raise InvalidSessionId(
            f"invalid session id {shown!r}: expected 8-64 characters of [0-9a-z-]",
            sessionId=shown if isinstance(shown, str) else None,
        )
    return value


_last_ms = 0
_counter = 0


def uuid7() -> str:
    """A UUIDv7 string: 48 bits of milliseconds, a 12-bit counter, random bits.

    The counter makes ids made in the same millisecond by this process still
    sort in creation order.
    """
    global _last_ms, _counter
    ms = time.time_ns() // 1_000_000
    if ms <= _last_ms:
        ms = _last_ms
        _counter += 1
        if _counter > 0xFFF:
            ms, _counter = ms + 1, 0
    else:
        _counter = 0
    _last_ms = ms
    rand = int.from_bytes(os.urandom(8), "big")
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= _counter << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return str(uuid.UUID(int=value))


def new_session_id() -> str:
    """A fresh, time-sortable session id."""
    return uuid7()


def new_id(prefix: str) -> str:
    """A fresh id for turns, messages, steps and operations (``prefix_<uuid7>``)."""
    return f"{prefix}_{uuid7()}"
