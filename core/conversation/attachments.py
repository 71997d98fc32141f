"""Attaching files to a prompt: what a file is, the limits, storing it, and what the model gets.

A file's type is decided from its bytes, never only from its name:

- images (PNG, JPEG, WebP, GIF) by their magic numbers, and refused when cut
  short (no end marker: a download that stopped half way);
- PDFs (``%PDF-``), whose text and page count are read with pypdf; one that
  needs a password is refused (:class:`~branchwise.core.errors.EncryptedPdf`);
- text (plain, Markdown, source code, CSV, JSON): valid UTF-8 without NUL
  bytes; the name's extension only refines which text type it is.

Anything else is refused with a plain reason. A file is read once, into
memory, and the bytes read are the bytes hashed and stored: a file that
changes while it is read is stored as read, never as a mix of hash and bytes.
Every refusal happens before anything is stored, so a refused prompt leaves
nothing behind (docs/storage.md, "Attachments").
"""

from __future__ import annotations

import base64
import io
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from branchwise.core.errors import (
    AttachmentEmpty,
    AttachmentTooLarge,
    AttachmentUnreadable,
    DamagedAttachment,
    EncryptedPdf,
    MessageTooLarge,
    TooManyImages,
    UnsupportedAttachment,
)
from branchwise.core.projection.attachments import IMAGE_TYPES, PDF_TYPE, AttachmentRef
from branchwise.core.projection.projection import Projection
from branchwise.core.store.attachments import BlobStore

MB = 1024 * 1024

_TEXT_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".json": "application/json",
}


@dataclass(frozen=True, slots=True)
class AttachmentLimits:
    """How much a message may carry.

    Attributes:
        file_bytes: largest single file.
        message_bytes: largest total of one message's files.
        images: most images in one message.
        image_turns: images of only the last this many prompts are sent to the
            model again (``None``: every image still in the context).
    """

    file_bytes: int = 20 * MB
    message_bytes: int = 50 * MB
    images: int = 10
    image_turns: int | None = None


DEFAULT_LIMITS = AttachmentLimits()


@dataclass(frozen=True, slots=True)
class PreparedAttachment:
    """A file read and judged, not stored yet.

    Attributes:
        name: the file's name (no folder).
        type: its media type, from its bytes.
        data: the bytes read (what will be hashed and stored).
        pages: a PDF's page count.
        text: a text file's or a PDF's text (``""`` for an image).
    """

    name: str
    type: str
    data: bytes
    pages: int | None = None
    text: str = ""

    @property
    def is_image(self) -> bool:
        """Shown as a thumbnail and sent as an image."""
        return self.type in IMAGE_TYPES


def _megabytes(limit: int) -> int:
    return max(1, round(limit / MB))


def read_file(path: Path, limits: AttachmentLimits = DEFAULT_LIMITS) -> PreparedAttachment:
    """Read and judge one file (a link is followed; one pointing nowhere is unreadable).

    Raises:
        AttachmentUnreadable: missing, a folder, not readable.
        AttachmentEmpty: no bytes.
        AttachmentTooLarge: over ``limits.file_bytes`` (never read past it).
        UnsupportedAttachment, DamagedAttachment, EncryptedPdf: see :func:`judge`.
    """
    path = Path(path)
    name = path.name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise AttachmentUnreadable(
            f"cannot read {name}: {exc.strerror or exc}", name=name, path=str(path)
        ) from None
    try:
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise AttachmentUnreadable(f"{name} is not a file", name=name, path=str(path))
            data = handle.read(limits.file_bytes + 1)
    except OSError as exc:
        raise AttachmentUnreadable(
            f"cannot read {name}: {exc.strerror or exc}", name=name, path=str(path)
        ) from None
    if len(data) > limits.file_bytes:
        raise AttachmentTooLarge(
            f"{name} is larger than {limits.file_bytes} bytes",
            name=name,
            limit=limits.file_bytes,
            megabytes=_megabytes(limits.file_bytes),
        )
    return judge(name, data)


def judge(name: str, data: bytes) -> PreparedAttachment:
    """Decide what ``data`` is, from its bytes.

    Raises:
        AttachmentEmpty: no bytes.
        UnsupportedAttachment: not an image, a PDF or UTF-8 text.
        DamagedAttachment: an image cut short, a PDF that cannot be read.
        EncryptedPdf: a PDF that needs a password.
    """
    if not data:
        raise AttachmentEmpty(f"{name} is empty", name=name)
    image = _image_type(data)
    if image is not None:
        if not _image_complete(image, data):
            raise DamagedAttachment(f"the image {name} is cut short", name=name)
        return PreparedAttachment(name, image, data)
    if data.startswith(b"%PDF-"):
        text, pages = _pdf_text(name, data)
        return PreparedAttachment(name, PDF_TYPE, data, pages, text)
    if b"\x00" not in data:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            kind = _TEXT_TYPES.get(os.path.splitext(name)[1].lower(), "text/plain")
            return PreparedAttachment(name, kind, data, None, text.removeprefix("\ufeff"))
    raise UnsupportedAttachment(f"{name} is not an image, a PDF or a text file", name=name)


def _image_type(data: bytes) -> str | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _image_complete(kind: str, data: bytes) -> bool:
    """Whether the image reaches its end marker (trailing padding after it is allowed)."""
    if kind == "image/png":
        return b"IEND\xaeB`\x82" in data[-64:]
    if kind == "image/jpeg":
        return data.rstrip(b"\x00\r\n ").endswith(b"\xff\xd9")
    if kind == "image/gif":
        return data.rstrip(b"\x00\r\n ").endswith(b";")
    declared = int.from_bytes(data[4:8], "little") + 8
    return len(data) >= declared


def _pdf_text(name: str, data: bytes) -> tuple[str, int]:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                reader.decrypt("")
                pages = list(reader.pages)
                texts = [page.extract_text() or "" for page in pages]
            except (FileNotDecryptedError, PdfReadError, NotImplementedError) as exc:
                raise EncryptedPdf(f"the PDF {name} needs a password", name=name) from exc
        else:
            pages = list(reader.pages)
            texts = [page.extract_text() or "" for page in pages]
    except EncryptedPdf:
        raise
    except Exception as exc:  # pypdf raises many kinds on a damaged file
        raise DamagedAttachment(f"the PDF {name} cannot be read: {exc}", name=name) from exc
    return "\n\n".join(text.strip() for text in texts).strip(), len(pages)


def read_files(
    paths: Sequence[Path], limits: AttachmentLimits = DEFAULT_LIMITS
) -> list[PreparedAttachment]:
    """Read and judge every file of one message, then check the message's limits.

    Raises:
        AttachmentRefused: the first file refused, or the message over a limit.
    """
    prepared = [read_file(Path(path), limits) for path in paths]
    check_message(prepared, limits)
    return prepared


def check_message(prepared: Sequence[PreparedAttachment], limits: AttachmentLimits) -> None:
    """Refuse a message whose files together are over the limits.

    Raises:
        MessageTooLarge: over ``limits.message_bytes`` in all.
        TooManyImages: more than ``limits.images`` images.
    """
    total = sum(len(item.data) for item in prepared)
    if total > limits.message_bytes:
        raise MessageTooLarge(
            f"the attachments hold {total} bytes, over {limits.message_bytes}",
            limit=limits.message_bytes,
            megabytes=_megabytes(limits.message_bytes),
        )
    images = sum(1 for item in prepared if item.is_image)
    if images > limits.images:
        raise TooManyImages(f"{images} images, over {limits.images}", limit=limits.images)


def store_attachments(
    blobs: BlobStore, prepared: Iterable[PreparedAttachment]
) -> tuple[AttachmentRef, ...]:
    """Store each file durably and return the references a message will hold.

    Call before the commit that refers to them; a failure leaves only blobs
    nothing refers to, which a collection pass frees later.

    Raises:
        DiskFull, ReadOnlyDataFolder: the blob folder cannot take them.
    """
    refs = []
    for item in prepared:
        sha = blobs.put(item.data)
        refs.append(AttachmentRef(sha, len(item.data), item.type, item.name, item.pages))
        _remember_text(sha, item.text)
    return tuple(refs)


def attach_files(
    root: Path, paths: Sequence[Path], limits: AttachmentLimits = DEFAULT_LIMITS
) -> tuple[AttachmentRef, ...]:
    """Read, judge and store ``paths`` for one message of a conversation under data root ``root``.

    The one call a command needs before it commits a prompt with files
    (``session say --attach``, an edit, a fan-out): the references it returns
    go into :func:`~branchwise.core.projection.events.user_message`.
    """
    if not paths:
        return ()
    return store_attachments(BlobStore(root), read_files(paths, limits))


# -- what the model is sent ----------------------------------------------------------------------

_TEXT_CACHE: OrderedDict[str, str] = OrderedDict()
_TEXT_CACHE_LOCK = threading.Lock()
_TEXT_CACHE_ITEMS = 32


def _remember_text(sha: str, text: str) -> None:
    with _TEXT_CACHE_LOCK:
        _TEXT_CACHE[sha] = text
        _TEXT_CACHE.move_to_end(sha)
        while len(_TEXT_CACHE) > _TEXT_CACHE_ITEMS:
            _TEXT_CACHE.popitem(last=False)


def attachment_text(blobs: BlobStore, ref: AttachmentRef) -> str:
    """A text file's or a PDF's text (read from its blob once, then remembered).

    Raises:
        AttachmentMissing: the blob is gone or damaged.
    """
    with _TEXT_CACHE_LOCK:
        cached = _TEXT_CACHE.get(ref.sha256)
    if cached is not None:
        return cached
    text = judge(ref.name, blobs.read(ref.sha256)).text
    _remember_text(ref.sha256, text)
    return text


def file_heading(ref: AttachmentRef) -> str:
    """How a file's text is introduced to the model (fixed English: it frames data, not UI)."""
    if ref.pages is not None:
        return f"Attached file {ref.name} ({ref.pages} pages):"
    return f"Attached file {ref.name}:"


def model_context(
    projection: Projection, blobs: BlobStore, limits: AttachmentLimits = DEFAULT_LIMITS
) -> list[dict[str, Any]]:
    """The conversation as a model sees it, attachments included.

    Messages without attachments are as
    :meth:`~branchwise.core.projection.projection.Projection.model_messages`
    gives them. A prompt with attachments also gets ``parts``: the
    OpenAI-compatible content parts (its text, then each file's text as a
    text part and each image as an ``image_url`` data URL); ``content`` then
    holds the text parts joined, for providers that take text only. Images
    of only the last ``limits.image_turns`` prompts with images are sent.

    Raises:
        AttachmentMissing: an attachment's bytes are gone or damaged.
    """
    entries = projection.model_messages_with_attachments()
    with_images = [i for i, (_, refs) in enumerate(entries) if any(r.is_image for r in refs)]
    keep = limits.image_turns
    sent_images = set(with_images if keep is None else with_images[len(with_images) - keep :])
    if keep == 0:
        sent_images = set()
    context: list[dict[str, Any]] = []
    for index, (message, refs) in enumerate(entries):
        if not refs:
            context.append(dict(message))
            continue
        parts: list[dict[str, Any]] = [{"type": "text", "text": message["content"]}]
        texts = [message["content"]]
        for ref in refs:
            if ref.is_image:
                if index in sent_images:
                    data = base64.b64encode(blobs.read(ref.sha256)).decode("ascii")
                    url = f"data:{ref.type};base64,{data}"
                    parts.append({"type": "image_url", "image_url": {"url": url}})
                texts.append(f"[image {ref.name}]")
            else:
                text = f"{file_heading(ref)}\n\n{attachment_text(blobs, ref)}"
                parts.append({"type": "text", "text": text})
                texts.append(text)
        context.append({"role": message["role"], "content": "\n\n".join(texts), "parts": parts})
    return context
