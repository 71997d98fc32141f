"""Reading, judging and showing attachments, off the UI thread.

A widget never reads a file: the composer asks :meth:`Attaching.read` for
the files dropped or picked (and :meth:`Attaching.read_pasted` for an image
pasted from the clipboard); reading, hashing and a PDF's text extraction run
in a worker thread and the composer gets the judged files back, or the
refusal as a notice in the user's words with the prompt left as it was.
The transcript asks :meth:`Attaching.previews` for the bytes of the images
it shows (and learns which attachments are missing or damaged), or
:func:`remote_previews` for a server's conversation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from branchwise.core.conversation.attachments import (
    PreparedAttachment,
    check_message,
    judge,
    read_file,
)
from branchwise.core.errors import AttachmentMissing, RemoteRefusal, RemoteUnavailable
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.remote.client import RemoteStore
from branchwise.core.settings import Settings
from branchwise.core.store.attachments import BlobStore

PASTED_NAME = "pasted-image.png"
"""The name an image pasted from the clipboard is attached under."""


class AttachingOwner(Protocol):
    """What attaching needs of the host."""

    @property
    def root(self) -> Path:
        """The data root."""
        ...

    @property
    def settings(self) -> Settings:
        """The app's settings (the limits)."""
        ...


@dataclass(frozen=True, slots=True)
class Preview:
    """An attachment as the transcript can show it.

    Attributes:
        ref: the reference.
        data: an image's bytes (``None`` for other files or a missing one).
        missing: the stored bytes are gone or damaged.
    """

    ref: AttachmentRef
    data: bytes | None
    missing: bool


class Attaching:
    """The host's attachment operations (see the module's docstring)."""

    def __init__(self, owner: AttachingOwner) -> None:
        self._owner = owner

    async def read(
        self, paths: Sequence[Path], pending: Sequence[PreparedAttachment] = ()
    ) -> list[PreparedAttachment]:
        """Read and judge ``paths`` to join ``pending`` in one message.

        Raises:
            AttachmentRefused: a file that cannot be attached, or the message
                over a limit with it (nothing is added).
        """
        limits = self._owner.settings.attachment_limits

        def work() -> list[PreparedAttachment]:
            found = [read_file(Path(path), limits) for path in paths]
            check_message([*pending, *found], limits)
            return found

        return await asyncio.to_thread(work)

    async def read_pasted(
        self, data: bytes, pending: Sequence[PreparedAttachment] = ()
    ) -> PreparedAttachment:
        """Judge an image pasted from the clipboard (already PNG bytes).

        Raises:
            AttachmentRefused: as :meth:`read`.
        """
        limits = self._owner.settings.attachment_limits

        def work() -> PreparedAttachment:
            prepared = judge(PASTED_NAME, data)
            check_message([*pending, prepared], limits)
            return prepared

        return await asyncio.to_thread(work)

    async def previews(self, refs: Sequence[AttachmentRef]) -> dict[str, Preview]:
        """Each reference's preview, by hash (bytes read and checked in a worker thread)."""
        blobs = BlobStore(self._owner.root)

        def work() -> dict[str, Preview]:
            found: dict[str, Preview] = {}
            for ref in refs:
                if ref.sha256 in found:
                    continue
                if ref.is_image:
                    try:
                        found[ref.sha256] = Preview(ref, blobs.read(ref.sha256), False)
                    except AttachmentMissing:
                        found[ref.sha256] = Preview(ref, None, True)
                else:
                    found[ref.sha256] = Preview(ref, None, blobs.check(ref) is not None)
            return found

        return await asyncio.to_thread(work)


async def remote_previews(remote: RemoteStore, refs: Sequence[AttachmentRef]) -> dict[str, Preview]:
    """Previews of a server's conversation: its images' bytes fetched from the server.

    An image the server no longer holds whole is missing; one that cannot be
    fetched now (the server is unreachable) shows by its name.
    """
    found: dict[str, Preview] = {}
    for ref in refs:
        if ref.sha256 in found:
            continue
        if not ref.is_image:
            found[ref.sha256] = Preview(ref, None, False)
            continue
        try:
            found[ref.sha256] = Preview(ref, await remote.attachment(ref.sha256), False)
        except RemoteRefusal as exc:
            found[ref.sha256] = Preview(ref, None, exc.code == "attachment_missing")
        except RemoteUnavailable:
            found[ref.sha256] = Preview(ref, None, False)
    return found
