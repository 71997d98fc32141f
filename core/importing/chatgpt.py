"""The ChatGPT data export: ``conversations.json``, alone or inside the export ``.zip``.

The file is one JSON array of conversations, each a ``mapping`` of node id to
``{id, message|null, parent, children}`` with ``current_node``, ``title`` and
``create_time``. Real exports are 100–600 MB, so the array is streamed with
ijson's C backend (yajl2_c), one conversation at a time: the file is never
held, and only the conversation being converted is in memory.

What is visible (rule 1): user messages; assistant messages addressed to
``all``; an assistant message addressed to anything else (``python``,
``browser``, ``dalle.text2im``…) is a tool call and the ``tool`` message
below it its result. Hidden: ``message: null``, the system role,
``metadata.is_visually_hidden_from_conversation``, and the content types
``user_editable_context``, ``model_editable_context``, ``thoughts`` and
``reasoning_recap``; a user or assistant message with no text is hidden too
(nothing to show). Image and other file parts of ``multimodal_text`` become a
short placeholder naming the file when ``metadata.attachments`` lists it
(``[image: photo.png]``, ``[file: notes.pdf]``).

When the export is a ``.zip`` that holds a user's uploaded files, they are
imported themselves instead: an ``image_asset_pointer`` part names its file
(``file-service://file-XXXX`` or ``sediment://file_XXXX``), and so does each
``metadata.attachments`` entry (``id``); the archive stores that file as a
member whose name starts with the id (``file-XXXX-photo.png``,
``file_XXXX-<uuid>.png``, at any depth). Each is judged from its bytes by the
attachment rules and limits (:mod:`~branchwise.core.conversation.attachments`)
and travels on its user item until the publisher stores it. A file the
archive lacks, or one the rules refuse (a cut-short image, over a limit),
keeps its placeholder, with a warning per conversation. Images in answers
and tool results (generated images) stay placeholders.

Bad input never crashes the reader: a conversation without a mapping is a
:class:`SourceSkip`; bytes that are not UTF-8 are replaced (U+FFFD) by the
repairing reader every JSON importer shares, with a warning naming the
conversation; damage after the first conversation (malformed JSON, nesting
deeper than :data:`MAX_DEPTH`) ends the stream with a :class:`SourceWarning`,
the conversations read before it stay; damage before it is a typed
:class:`~branchwise.core.errors.MalformedImport`. A conversation without
``current_node`` is read with a warning: its newest leaf ends the main path.

Tool results: ChatGPT has no call ids, so a ``tool`` message answers the
call above it. A call may have several results in a chain (browsing writes a
``tether_browsing_display`` then one ``tether_quote`` per quote, each under
the one before): every result up the chain belongs to the same call. A result
whose call is missing (its parent is not in ``mapping``, or is not a call)
keeps its own id as call id; the publisher gives it an empty call. A zip is read
only for its ``conversations.json`` member, after checking its size and
compression ratio against zip bombs and its name against path escapes.

Nesting is guarded before ijson sees the bytes: ijson keeps a path string per
level, so a few megabytes of ``[[[[…`` would cost gigabytes. The guard keeps
only quotes and brackets (C-level passes over each megabyte), drops the
strings among them and counts the brackets left.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import re
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Any

import ijson

from branchwise.core.conversation.attachments import (
    DEFAULT_LIMITS,
    AttachmentLimits,
    PreparedAttachment,
    judge,
)
from branchwise.core.errors import (
    AttachmentRefused,
    AttachmentTooLarge,
    ImportNotFound,
    MalformedImport,
    UnsafeArchive,
)
from branchwise.core.importing.json_stream import RepairingReader, holds_replacement
from branchwise.core.importing.source import (
    ItemKind,
    Progress,
    SourceItem,
    SourceRecord,
    SourceSkip,
    SourceTree,
    SourceWarning,
)

FORMAT = "chatgpt"
MEMBER = "conversations.json"
MAX_DEPTH = 256
"""Deepest JSON nesting accepted; a real export nests about a dozen levels."""
MAX_UNPACKED = 16 * 2**30
"""Largest ``conversations.json`` a zip may unpack to (real exports are under 1 GiB)."""
MAX_RATIO = 200
"""Largest compression ratio accepted for the member (JSON deflates 5–20×; bombs 1000×)."""
CHUNK = 1 << 20

_HIDDEN_TYPES = frozenset(
    {"user_editable_context", "model_editable_context", "thoughts", "reasoning_recap"}
)
_PLAIN_STRING = re.compile(rb'"[^"]*"')
_NOT_MARKS = bytes(c for c in range(256) if c not in b'[]{}"')
_DEPTH_STEP = [0] * 256
for _open in b"[{":
    _DEPTH_STEP[_open] = 1
for _close in b"]}":
    _DEPTH_STEP[_close] = -1


class _TooDeep(Exception):
    """Raised from inside ijson's read when the nesting passes :data:`MAX_DEPTH`."""


class _NotAnArray(Exception):
    """The file does not start with ``[``: not a ChatGPT export."""


class _GuardedStream:
    """A binary reader that counts bytes and refuses absurd nesting before ijson parses it."""

    def __init__(self, raw: IO[bytes], limit: int | None = None, chunk: int = CHUNK) -> None:
        self._raw = raw
        self._chunk = chunk
        self._limit = limit
        self.read_bytes = 0
        self._depth = 0
        self._carry = b""  # the quotes and brackets of a string still open
        self._backslashes = b""  # a chunk's trailing backslashes, read with the next one
        self._started = False

    def read(self, size: int = -1) -> bytes:
        if size == 0:
            return b""  # ijson's probe for bytes or text
        chunk = self._raw.read(self._chunk if size is None or size < 0 else max(size, self._chunk))
        if not self._started and chunk:
            chunk = chunk.removeprefix(b"\xef\xbb\xbf")  # a BOM some editors add
            head = chunk.lstrip()
            if head:
                self._started = True
                if head[:1] != b"[":
                    raise _NotAnArray
        self.read_bytes += len(chunk)
        if self._limit is not None and self.read_bytes > self._limit:
            raise _TooDeep  # unpacks to more than the archive declared
        self._check_depth(chunk)
        return chunk

    def _check_depth(self, chunk: bytes) -> None:
        """Refuse nesting deeper than :data:`MAX_DEPTH`, counting brackets outside strings.

        Cheap because almost every byte is dropped by C-level passes first:
        escaped backslashes and quotes are removed (a trailing backslash waits
        for the next chunk), then everything but quotes and brackets; what is
        left is short, its strings are plain ``"…"`` runs, and a string still
        open at the end is carried over.
        """
        data = self._backslashes + chunk
        kept = data.rstrip(b"\\")
        self._backslashes = data[len(kept) :]
        marks = kept.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_MARKS)
        text = _PLAIN_STRING.sub(b"", self._carry + marks)
        quote = text.find(b'"')
        if quote >= 0:  # the rest is one string that goes on in the next chunk
            self._carry = text[quote:]
            text = text[:quote]
        else:
            self._carry = b""
        if not text:
            return
        steps = list(map(_DEPTH_STEP.__getitem__, text))
        if max(itertools.accumulate(steps, initial=self._depth)) > MAX_DEPTH:
            raise _TooDeep
        self._depth += sum(steps)


@contextlib.contextmanager
def _export_stream(
    path: Path,
) -> Iterator[tuple[_GuardedStream, int, zipfile.ZipFile | None]]:
    """The ``conversations.json`` bytes of ``path`` (a file or an export zip), their size,
    and the archive when ``path`` is one (open while the stream is)."""
    try:
        is_zip = zipfile.is_zipfile(path)
    except OSError as exc:
        raise ImportNotFound(f"{path} cannot be read: {exc.strerror or exc}") from exc
    if not is_zip:
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed below, after the generator ends
        except OSError as exc:
            raise ImportNotFound(f"{path} cannot be read: {exc.strerror or exc}") from exc
        with handle:
            yield _GuardedStream(handle), os.fstat(handle.fileno()).st_size, None
        return
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise MalformedImport(f"{path} is not a readable zip archive: {exc}") from exc
    with archive:
        member = _conversations_member(archive, path)
        with archive.open(member) as raw:
            yield _GuardedStream(raw, member.file_size), member.file_size, archive


def _conversations_member(archive: zipfile.ZipFile, path: Path) -> zipfile.ZipInfo:
    """The archive's ``conversations.json``, checked against path escapes and zip bombs."""
    found = [
        info
        for info in archive.infolist()
        if not info.is_dir() and PurePosixPath(info.filename).name == MEMBER
    ]
    if not found:
        raise UnsafeArchive(f"{path} holds no {MEMBER}", path=str(path))
    member = min(found, key=lambda info: info.filename.count("/"))
    name = PurePosixPath(member.filename.replace("\\", "/"))
    if name.is_absolute() or ".." in name.parts or ":" in member.filename:
        raise UnsafeArchive(f"{path} names a path outside the archive", member=member.filename)
    if member.file_size > MAX_UNPACKED:
        raise UnsafeArchive(f"{MEMBER} in {path} unpacks to more than {MAX_UNPACKED} bytes")
    if member.file_size > MAX_RATIO * max(member.compress_size, 1) + CHUNK:
        raise UnsafeArchive(f"{MEMBER} in {path} is compressed more than {MAX_RATIO}:1")
    return member


def sniff(path: Path) -> bool:
    """Whether ``path`` looks like a ChatGPT export: a zip with ``conversations.json``, or a
    JSON array whose first conversation has a ``mapping``."""
    try:
        if path.is_dir():
            return False
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                return any(PurePosixPath(name).name == MEMBER for name in archive.namelist())
        with open(path, "rb") as handle:
            head = handle.read(1 << 16)
    except (OSError, zipfile.BadZipFile):
        return False
    head = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    return head[:1] == b"[" and b'"mapping"' in head


def read(path: Path) -> Iterator[SourceRecord]:
    """Stream the conversations of a ChatGPT export (see the module docstring).

    Raises:
        ImportNotFound: the path cannot be read.
        MalformedImport: the file is not a JSON array, or is damaged before
            its first conversation.
        UnsafeArchive: a zip bomb, a path escape, or no ``conversations.json``.
    """
    path = Path(path)
    with _export_stream(path) as (stream, total, archive):
        assets = None if archive is None else _ArchivedFiles(archive)
        index = 0
        reader = RepairingReader(stream)
        try:
            for raw in ijson.items(reader, "item", use_float=True, buf_size=CHUNK):
                index += 1
                location = f"{path}#{index}"
                if reader.repaired and holds_replacement(raw):
                    yield SourceWarning(f"{location}: non-UTF-8 bytes replaced")
                if isinstance(raw, dict) and "mapping" in raw and not raw.get("current_node"):
                    yield SourceWarning(
                        f"{location}: the conversation names no current message "
                        "(current_node); its newest message ends the main path"
                    )
                yield _conversation(raw, index, location, assets)
                if assets is not None:
                    for message in assets.take_warnings(location):
                        yield SourceWarning(message)
                yield Progress(stream.read_bytes, total)
        except (_NotAnArray, _TooDeep, ijson.JSONError, UnicodeDecodeError) as exc:
            why = _damage(exc)
            if index == 0:
                raise MalformedImport(f"{path} cannot be read as a ChatGPT export: {why}") from exc
            yield SourceWarning(
                f"{path}: {why} after conversation {index}; the rest of the file was not imported"
            )
        yield Progress(total, total)


def _damage(exc: Exception) -> str:
    if isinstance(exc, _NotAnArray):
        return "it is not a JSON array of conversations"
    if isinstance(exc, _TooDeep):
        return f"nesting deeper than {MAX_DEPTH} levels, or more bytes than the archive declared"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"malformed JSON ({text})"


def _conversation(
    raw: Any, index: int, location: str, assets: _ArchivedFiles | None = None
) -> SourceTree | SourceSkip:
    """One conversation object as a :class:`SourceTree` (or why it is skipped)."""
    if not isinstance(raw, dict):
        return SourceSkip(location, "not a conversation object")
    mapping = raw.get("mapping")
    if not isinstance(mapping, dict) or not mapping:
        return SourceSkip(location, "the conversation has no message tree (mapping)")
    conversation_id = raw.get("conversation_id") or raw.get("id")
    if not isinstance(conversation_id, str) or not conversation_id:
        return SourceSkip(location, "the conversation has no id")
    title = raw.get("title")
    current = raw.get("current_node")
    items: list[SourceItem] = []
    for key, node in mapping.items():
        if not isinstance(node, dict):
            continue
        node_id = node.get("id")
        node_id = node_id if isinstance(node_id, str) and node_id else str(key)
        parent = node.get("parent")
        items.append(
            _item(node_id, parent if isinstance(parent, str) else None, node.get("message"), assets)
        )
    by_id = {item.id: item for item in items}
    paired = tuple(
        _with_call(item, _call_of(item, by_id)) if item.kind == "tool_result" else item
        for item in items
    )
    return SourceTree(
        format=FORMAT,
        id=conversation_id,
        title=title if isinstance(title, str) else "",
        created=_time(raw.get("create_time")),
        items=paired,
        current=current if isinstance(current, str) else None,
        location=location,
    )


def _call_of(result: SourceItem, by_id: dict[str, SourceItem]) -> str | None:
    """The call a tool result answers: the nearest call above it through results and hidden
    nodes (a browsing call's chain of quotes), ``None`` when there is none."""
    seen = {result.id}
    node = by_id.get(result.parent) if result.parent is not None else None
    while node is not None and node.id not in seen:
        if node.kind == "tool_call":
            return node.id
        if node.kind not in (None, "tool_result"):
            return None
        seen.add(node.id)
        node = by_id.get(node.parent) if node.parent is not None else None
    return None


def _with_call(item: SourceItem, call: str | None) -> SourceItem:
    return dataclasses.replace(item, call_id=call if call is not None else item.id)


def _time(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value:
        return float(value)
    return None


def _item(
    node_id: str, parent: str | None, message: object, assets: _ArchivedFiles | None = None
) -> SourceItem:
    """One mapping node: its kind (``None`` when hidden) and what it shows."""
    hidden = SourceItem(node_id, parent, None)
    if not isinstance(message, dict):
        return hidden
    author = message.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    content = message.get("content")
    content = content if isinstance(content, dict) else {}
    metadata = message.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    content_type = content.get("content_type")
    if (
        role not in ("user", "assistant", "tool")
        or content_type in _HIDDEN_TYPES
        or metadata.get("is_visually_hidden_from_conversation")
    ):
        return hidden
    names = _file_names(metadata)
    files: tuple[PreparedAttachment, ...] = ()
    held: frozenset[str] = frozenset()
    if role == "user" and assets is not None:
        held, files = assets.files_of(_file_ids(content, names), names)
    text = _text(content, names, held)
    time = _time(message.get("create_time"))
    recipient = message.get("recipient")
    if role == "tool":
        name = author.get("name") if isinstance(author, dict) else None
        return SourceItem(
            node_id,
            parent,
            "tool_result",
            text,
            time,
            tool_name=name if isinstance(name, str) else None,
        )
    if role == "assistant" and isinstance(recipient, str) and recipient != "all":
        return SourceItem(
            node_id,
            parent,
            "tool_call",
            text,
            time,
            call_id=node_id,
            tool_name=recipient,
            arguments=text,
        )
    if not text.strip() and not files:
        return hidden
    kind: ItemKind = "user" if role == "user" else "assistant"
    model = metadata.get("model_slug")
    return SourceItem(
        node_id,
        parent,
        kind,
        text,
        time,
        model=model if isinstance(model, str) and kind == "assistant" else None,
        attachments=files,
    )


def _file_names(metadata: dict[str, Any]) -> dict[str, str]:
    """File id -> name, from a message's ``metadata.attachments`` (what ChatGPT lists)."""
    found: dict[str, str] = {}
    files = metadata.get("attachments")
    for item in files if isinstance(files, list) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            found[str(item.get("id", ""))] = item["name"]
    return found


def _text(
    content: dict[str, Any], names: dict[str, str] | None = None, held: frozenset[str] = frozenset()
) -> str:
    """The visible text of one message's content, whatever its type.

    A file part becomes a placeholder naming the file when the message lists
    its name (``[image: photo.png]``), unless the file itself was imported
    (its id in ``held``).
    """
    parts = content.get("parts")
    if isinstance(parts, list):
        texts = [_part_text(part, names or {}, held) for part in parts]
        listed = {name for file_id, name in (names or {}).items() if file_id not in held}
        shown = {name for part in texts for name in listed if f": {name}]" in part}
        texts += [
            f"[file: {name}]"
            for file_id, name in (names or {}).items()
            if file_id not in held and name not in shown
        ]
        return "\n".join(filter(None, texts))
    for field in ("text", "result", "summary"):
        value = content.get(field)
        if isinstance(value, str) and value:
            return value
    return ""


def _pointer_id(part: dict[str, Any]) -> str:
    """The file id an asset pointer names: ``file-XXXX`` of ``file-service://file-XXXX``."""
    pointer = part.get("asset_pointer")
    return pointer.rsplit("/", 1)[-1] if isinstance(pointer, str) else ""


def _file_ids(content: dict[str, Any], names: dict[str, str]) -> list[str]:
    """The ids of a message's files, in order: its image parts, then its listed attachments."""
    ids: list[str] = []
    parts = content.get("parts")
    for part in parts if isinstance(parts, list) else []:
        if isinstance(part, dict) and "image" in str(part.get("content_type", "")):
            file_id = _pointer_id(part)
            if file_id and file_id not in ids:
                ids.append(file_id)
    ids += [file_id for file_id in names if file_id and file_id not in ids]
    return ids


def _part_text(part: object, names: dict[str, str], held: frozenset[str] = frozenset()) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return ""
    text = part.get("text")
    if isinstance(text, str):
        return text
    kind = part.get("content_type")
    if isinstance(kind, str) and "image" in kind:
        file_id = _pointer_id(part)
        if file_id in held:
            return ""
        name = names.get(file_id)
        return f"[image: {name}]" if name else "[image]"
    if isinstance(kind, str) and "audio" in kind:
        return "[audio]"
    return "[attachment]"


_FILE_ID = re.compile(r"file[-_][A-Za-z0-9]+")


class _ArchivedFiles:
    """The user's uploaded files an export zip holds, found by their file id.

    Members are indexed by name once, on first use; a member whose name
    escapes the archive is ignored, one whose size or compression ratio is
    absurd is refused, and at most ``limits.file_bytes`` + 1 bytes of one
    are ever read. Refusals and missing files are counted per conversation
    (:meth:`take_warnings`).
    """

    def __init__(self, archive: zipfile.ZipFile, limits: AttachmentLimits = DEFAULT_LIMITS) -> None:
        self._archive = archive
        self._limits = limits
        self._members: dict[str, zipfile.ZipInfo] | None = None
        self._judged: dict[str, PreparedAttachment | str] = {}  # this conversation's files
        self._missing: set[str] = set()
        self._refused: list[str] = []

    def _index(self) -> dict[str, zipfile.ZipInfo]:
        if self._members is None:
            self._members = {}
            for info in self._archive.infolist():
                name = PurePosixPath(info.filename.replace("\\", "/"))
                if info.is_dir() or name.is_absolute() or ".." in name.parts:
                    continue
                if ":" in info.filename:
                    continue
                found = _FILE_ID.match(name.name)
                if found is not None:
                    self._members.setdefault(found.group(0), info)
        return self._members

    def files_of(
        self, file_ids: list[str], names: dict[str, str]
    ) -> tuple[frozenset[str], tuple[PreparedAttachment, ...]]:
        """The files of one user message the archive holds (their ids, and each judged).

        A file refused by a message limit (too many images, too many bytes in
        all) is left out like one the archive lacks, with a warning.
        """
        held: list[str] = []
        files: list[PreparedAttachment] = []
        for file_id in file_ids:
            judged = self._judge(file_id, names.get(file_id))
            if isinstance(judged, str):
                continue
            images = sum(1 for f in files if f.is_image) + (1 if judged.is_image else 0)
            total = sum(len(f.data) for f in files) + len(judged.data)
            if images > self._limits.images or total > self._limits.message_bytes:
                self._refused.append(f"{judged.name} (over the limits of one message)")
                continue
            held.append(file_id)
            files.append(judged)
        return frozenset(held), tuple(files)

    def _judge(self, file_id: str, listed: str | None) -> PreparedAttachment | str:
        """The member of ``file_id`` read and judged, or why not (remembered per conversation)."""
        if file_id in self._judged:
            return self._judged[file_id]
        info = self._index().get(file_id)
        if info is None:
            self._missing.add(file_id)
            self._judged[file_id] = "missing"
            return "missing"
        base = PurePosixPath(info.filename.replace("\\", "/")).name
        name = listed or base[len(file_id) :].lstrip("-_") or base
        try:
            limit = self._limits.file_bytes
            if info.file_size > limit:
                raise AttachmentTooLarge(
                    f"{name} is larger than {limit} bytes", name=name, limit=limit
                )
            if info.file_size > MAX_RATIO * max(info.compress_size, 1) + CHUNK:
                raise UnsafeArchive(f"{name} is compressed more than {MAX_RATIO}:1")
            with self._archive.open(info) as raw:
                data = raw.read(limit + 1)
            if len(data) > limit:
                raise AttachmentTooLarge(
                    f"{name} is larger than {limit} bytes", name=name, limit=limit
                )
            result: PreparedAttachment | str = judge(name, data)
        except (AttachmentRefused, UnsafeArchive) as exc:
            result = f"{name} ({exc.message})"
        except (OSError, zipfile.BadZipFile, zlib.error, EOFError) as exc:
            result = f"{name} (it cannot be read from the archive: {exc})"
        if isinstance(result, str):
            self._refused.append(result)
        self._judged[file_id] = result
        return result

    def take_warnings(self, location: str) -> list[str]:
        """This conversation's warnings (missing and refused files); starts the next one afresh."""
        warnings = []
        if self._missing:
            count = len(self._missing)
            warnings.append(
                f"{location}: {count} attached file{'s' if count != 1 else ''} "
                "not in the archive; kept as placeholders"
            )
        warnings += [
            f"{location}: attached file {why} not imported; kept as a placeholder"
            for why in self._refused
        ]
        self._judged.clear()
        self._missing.clear()
        self._refused.clear()
        return warnings
