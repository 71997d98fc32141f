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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import ijson

from branchwise.core.errors import MalformedImport
from branchwise.core.importing.source import Progress, SourceRecord, SourceWarning

_REPLACEMENT = "\ufffd"
_REPLACEMENT_BYTES = _REPLACEMENT.encode()
_HEAD_BYTES = 64 * 1024


class SupportsRead(Protocol):
    """Anything with a binary ``read`` (a file, a zip member, a guarded stream)."""

    def read(self, size: int = -1, /) -> bytes:
        """Up to ``size`` bytes (all when negative); empty at the end."""


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
    """The document stopped being JSON at element ``index`` (nothing after it is read).

    At index 0 nothing was read at all: the file is not this format (the
    importer raises); later, the elements before it were whole.
    """

    index: int
    reason: str


class RepairingReader:
    """A binary stream that yields valid UTF-8: invalid bytes become U+FFFD, and are noted.

    Every JSON importer reads through it (ChatGPT over its nesting guard), so
    one stray byte costs one character, never the rest of the file.
    """

    def __init__(self, raw: BinaryIO | SupportsRead) -> None:
        self._raw = raw
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self.repaired = False  # sticky: some bytes of the file so far were not UTF-8
        self.read_bytes = 0

    def read(self, size: int | None = -1) -> bytes:
        chunk = self._raw.read(-1 if size is None else size)
        self.read_bytes += len(chunk)
        text = self._decoder.decode(chunk, final=not chunk)
        if text.count(_REPLACEMENT) > chunk.count(_REPLACEMENT_BYTES):
            self.repaired = True
        return text.encode("utf-8")


def _values(reader: RepairingReader, top: str) -> Iterator[Any]:
    """The top-level array's elements (or the lone top-level object), built from parse events.

    Built here rather than by ``ijson.items``: its events carry their full
    prefix, so its memory grows with the square of the nesting depth and a few
    kilobytes of brackets exhaust it; these events carry none, and the build
    is an explicit stack, linear in depth and free of recursion.
    """
    stack: list[Any] = []
    keys: list[str | None] = []
    key: str | None = None
    level = 1 if top == "[" else 0  # the depth at which a finished value is a conversation
    for event, value in ijson.basic_parse(reader, use_float=True):
        if event == "map_key":
            key = value
            continue
        if event in ("start_map", "start_array"):
            stack.append({} if event == "start_map" else [])
            keys.append(key)
            key = None
            continue
        if event in ("end_map", "end_array"):
            value = stack.pop()
            key = keys.pop()
        if len(stack) == level:
            yield value
            continue
        if not stack:
            continue  # a scalar at the top: not a conversation
        holder = stack[-1]
        if isinstance(holder, list):
            holder.append(value)
        else:
            holder[key] = value


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
        reader = RepairingReader(raw)
        index = 0
        try:
            for value in _values(reader, shape):
                # The parser reads ahead, so a repair is pinned on the elements holding U+FFFD.
                repaired = reader.repaired and holds_replacement(value)
                yield Element(
                    index=index, value=value, repaired=repaired, read_bytes=reader.read_bytes
                )
                index += 1
        except (ijson.JSONError, ValueError) as exc:
            yield Malformed(index=index, reason=f"malformed JSON: {exc}")


def holds_replacement(value: Any) -> bool:
    """Whether any string (key or value) inside ``value`` holds U+FFFD.

    The parser reads ahead, so the reader's sticky flag cannot say which
    element the repaired bytes were in; the elements holding U+FFFD can.
    """
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


def export_records(
    path: Path,
    kind: str,
    conversation: Callable[[str, Any], Iterator[SourceRecord]],
) -> Iterator[SourceRecord]:
    """Every conversation of the JSON export at ``path``, as ``conversation`` reads each.

    The frame Open WebUI and LibreChat share: ``conversation`` gets a location
    for its warnings and one top-level element. A document damaged before its
    first conversation is not this format at all; damage after it ends the
    file with a warning, keeping the conversations before it. ``kind`` names
    the format in the refusal ("a LibreChat export").

    Raises:
        MalformedImport: the file is not JSON, or breaks off before its first conversation.
    """
    path = Path(path)
    total = path.stat().st_size if path.is_file() else 0
    for element in stream(path):
        if isinstance(element, Malformed):
            if element.index == 0:
                raise MalformedImport(f"{path} cannot be read as {kind}: {element.reason}")
            yield SourceWarning(
                f"{path}: {element.reason} after conversation {element.index}; "
                "the rest of the file was not imported"
            )
            return
        location = f"{path}#{element.index}"
        if element.repaired:
            yield SourceWarning(f"{location}: non-UTF-8 bytes replaced")
        yield from conversation(location, element.value)
        yield Progress(read_bytes=element.read_bytes, total_bytes=total)
