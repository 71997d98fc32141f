"""What a message's attachment is in the log: a reference to stored bytes (docs/storage.md).

A ``message/user`` event names each attached file by ``{"sha256", "size",
"type", "name"}`` (and ``pages`` for a PDF): the bytes themselves live once
per data root, content-addressed (:mod:`~branchwise.core.store.attachments`).
A fork, an edit or a regenerate copies the reference with the log and so
shares the bytes; nothing else in the log changes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from branchwise.core.errors import InvalidEvent

_SHA256 = re.compile(r"[0-9a-f]{64}")

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})
"""The image types a message may carry (sent to a model as an image)."""

PDF_TYPE = "application/pdf"


def is_sha256(value: object) -> bool:
    """Whether ``value`` is a lowercase hex SHA-256 (the only name a blob may have)."""
    return isinstance(value, str) and _SHA256.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class AttachmentRef:
    """One attached file as a message refers to it.

    Attributes:
        sha256: hash of the bytes stored (the blob's name).
        size: their length.
        type: the media type decided from the bytes (``image/png``, ``text/markdown``…).
        name: the file's name when it was attached (shown, and sent with text).
        pages: a PDF's page count (``None`` otherwise).
    """

    sha256: str
    size: int
    type: str
    name: str
    pages: int | None = None

    @property
    def is_image(self) -> bool:
        """Sent to the model as an image, shown as a thumbnail."""
        return self.type in IMAGE_TYPES

    def to_json(self) -> dict[str, Any]:
        """``{"sha256", "size", "type", "name"}`` (+ ``pages`` for a PDF)."""
        data: dict[str, Any] = {
            "sha256": self.sha256,
            "size": self.size,
            "type": self.type,
            "name": self.name,
        }
        if self.pages is not None:
            data["pages"] = self.pages
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AttachmentRef:
        """The reference an event (or a snapshot) recorded.

        Raises:
            InvalidEvent: not a reference of this shape.
        """
        try:
            sha, size, kind, name = data["sha256"], data["size"], data["type"], data["name"]
        except (KeyError, TypeError):
            raise InvalidEvent("an attachment names sha256, size, type and name") from None
        pages = data.get("pages")
        if (
            not is_sha256(sha)
            or type(size) is not int
            or size < 0
            or not isinstance(kind, str)
            or not isinstance(name, str)
            or not (pages is None or type(pages) is int)
        ):
            raise InvalidEvent("an attachment reference of another shape")
        return cls(sha, size, kind, name, pages)


def attachments_of(event: Mapping[str, Any]) -> tuple[AttachmentRef, ...]:
    """The references a ``message/user`` event holds (none for older logs).

    Raises:
        InvalidEvent: ``attachments`` is not a list of references.
    """
    raw = event.get("attachments")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidEvent("attachments must be a list")
    return tuple(AttachmentRef.from_json(item) for item in raw)
