"""Reading a JSON export one conversation at a time, whatever its size or its bytes.

Open WebUI and LibreChat exports are one JSON document: an array of
conversations (or one conversation object). Real exports run to hundreds of
megabytes, so :func:`stream` hands out one top-level element at a time with
ijson (its C backend), never the whole document. Bytes that are not UTF-8 are
replaced (U+FFFD) rather than failing the file, and each element says whether
that happened so the importer can warn about that conversation only. A
document that stops being JSON ends the stream with :class:`Malformed`: the
conversations before it were whole and stay usable.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import ijson

_REPLACEMENT = "\ufffd"
_REPLACEMENT_BYTES = _REPLACEMENT.encode()
_HEAD_BYTES = 64 * 1024
MAX_DEPTH = 1000
"""Deeper nesting ends the stream: ijson's memory grows with the square of the depth
(each event carries its full prefix), so a few kilobytes of brackets could exhaust it."""
# MAX_DEPTH openers with no closer between them (possessive: no backtracking).
_TOO_DEEP = re.compile(rb"(?:[\[{][^\[\]{}]*+){%d}" % MAX_DEPTH)


@dataclass(frozen=True, slots=True)
class Element:
    """One top-level element of the document (index 0 for a lone object).

    Attributes:
        index: position in the top-level array.
        value: the element, built as plain dicts, lists, str, float, int, bool, None.
        repaired: non-UTF-8 bytes inside this element were replaced.
        read_bytes: how far into the file the reader is, for progress.
    """

    index: int
    value: Any
    repaired: bool
    read_bytes: int


@dataclass(frozen=True, slots=True)
class Malformed:
    """The document stopped being JSON at element ``index`` (nothing after it is read)."""

    index: int
    reason: str


class _TooDeep(ValueError):
    """The document nests deeper than :data:`MAX_DEPTH`."""


class _RepairingReader:
    """A binary stream that yields valid UTF-8 (invalid bytes become U+FFFD, and are noted)
    and refuses absurd nesting before the parser sees it.

    The depth check counts brackets without knowing strings, so text holding a
    thousand ``[`` in a row and no ``]`` would count as nesting too; no real
    conversation does, and the cost is a C-speed scan per chunk.
    """

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self.repaired = False  # sticky: some bytes of the file so far were not UTF-8
        self.read_bytes = 0
        self._open_run = 0  # openers since the last closer, across chunk ends

    def read(self, size: int | None = -1) -> bytes:
        chunk = self._raw.read(-1 if size is None else size)
        self.read_bytes += len(chunk)
        self._check_depth(chunk)
        text = self._decoder.decode(chunk, final=not chunk)
        if text.count(_REPLACEMENT) > chunk.count(_REPLACEMENT_BYTES):
            self.repaired = True
        return text.encode("utf-8")

    def _check_depth(self, chunk: bytes) -> None:
        last_close = max(chunk.rfind(b"]"), chunk.rfind(b"}"))
        if last_close < 0:
            self._open_run += _openers(chunk)
        else:
            first_close = min(i for i in (chunk.find(b"]"), chunk.find(b"}")) if i >= 0)
            if self._open_run + _openers(chunk[:first_close]) >= MAX_DEPTH:
                raise _TooDeep(f"nesting deeper than {MAX_DEPTH} levels")
            self._open_run = _openers(chunk[last_close + 1 :])
        if self._open_run >= MAX_DEPTH or _TOO_DEEP.search(chunk):
            raise _TooDeep(f"nesting deeper than {MAX_DEPTH} levels")


def _openers(data: bytes) -> int:
    return data.count(b"[") + data.count(b"{")


def head(path: Path) -> bytes:
    """The first bytes of ``path`` (empty when it cannot be read), for a cheap sniff."""
    try:
        with Path(path).open("rb") as handle:
            return handle.read(_HEAD_BYTES)
    except OSError:
        return b""


def top_level(sample: bytes) -> str | None:
    """``"["`` or ``"{"``: how the document starts (after a BOM and white space), else ``None``."""
    stripped = sample.removeprefix(codecs.BOM_UTF8).lstrip()
    first = stripped[:1].decode("ascii", errors="replace")
    return first if first in ("[", "{") else None


def stream(path: Path) -> Iterator[Element | Malformed]:
    """Each element of the top-level array of ``path`` (or its one top-level object)."""
    shape = top_level(head(path))
    if shape is None:
        yield Malformed(index=0, reason="not a JSON array or object")
        return
    with Path(path).open("rb") as raw:
        reader = _RepairingReader(raw)
        prefix = "item" if shape == "[" else ""
        index = 0
        try:
            for value in ijson.items(reader, prefix, use_float=True):
                # The parser reads ahead, so a repair is pinned on the elements holding U+FFFD.
                repaired = reader.repaired and _holds_replacement(value)
                yield Element(
                    index=index, value=value, repaired=repaired, read_bytes=reader.read_bytes
                )
                index += 1
        except _TooDeep as exc:
            yield Malformed(index=index, reason=str(exc))
        except (ijson.JSONError, ValueError) as exc:
            yield Malformed(index=index, reason=f"malformed JSON: {exc}")


def _holds_replacement(value: Any) -> bool:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if _REPLACEMENT in item:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False
