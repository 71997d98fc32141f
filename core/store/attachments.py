"""Attachment bytes, stored once per data root under their SHA-256 (docs/storage.md, "Attachments").

``<data root>/attachments/sha256/<first two hex digits>/<hash>`` holds the
bytes of every attached file. The name is the hash of exactly the bytes
written, so the same file attached in ten conversations is one file, and a
fork, an edit or a regenerate, which copy the log's references, share it
with no copy at all.

A blob is written before any commit refers to it: into
``attachments/incoming/`` under a temporary name, fsynced, renamed to its
hash, and its folder fsynced. A crash before the rename leaves a temporary
file; one after it leaves a blob nothing refers to yet. Neither is ever a
reference without bytes, and :meth:`BlobStore.collect` removes both later,
keeping every blob any session refers to (the Trash included) and anything
younger than a grace period (a turn may be about to commit its reference).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from branchwise.core.errors import AttachmentMissing, BranchwiseError
from branchwise.core.fs.atomic import (
    disk_full_as_typed,
    fsync_dir,
    refusing_read_only,
    write_durably,
)
from branchwise.core.fs.safe_open import open_no_follow
from branchwise.core.projection.attachments import AttachmentRef, is_sha256

ATTACHMENTS_DIR = "attachments"

COLLECT_GRACE = 3600.0
"""Seconds an unreferenced blob is kept: a turn that stored it may not have committed yet."""


@dataclass(frozen=True, slots=True)
class BlobProblem:
    """A referenced blob that cannot be used: ``missing`` or ``damaged`` (another hash)."""

    ref: AttachmentRef
    problem: str


class BlobStore:
    """The content-addressed attachment folder of one data root.

    Args:
        root: the data root (the folder holding ``sessions/``).
    """

    def __init__(self, root: Path) -> None:
        self.directory = Path(root) / ATTACHMENTS_DIR
        self.blobs = self.directory / "sha256"
        self.incoming = self.directory / "incoming"

    def path(self, sha256: str) -> Path:
        """Where the blob named ``sha256`` lives.

        Raises:
            AttachmentMissing: not a SHA-256 (it could name another path).
        """
        if not is_sha256(sha256):
            raise AttachmentMissing(f"{sha256!r} is not an attachment hash", sha256=str(sha256))
        return self.blobs / sha256[:2] / sha256

    def put(self, data: bytes) -> str:
        """Store ``data`` durably under its hash and return the hash.

        Returns once the bytes and their name are on the disk, so a commit
        written after it may refer to them. A blob already there with the
        right bytes is kept (its time is refreshed, so a collection pass
        running now keeps it); one whose bytes are damaged is replaced.

        Raises:
            DiskFull: no room (nothing is left behind).
            ReadOnlyDataFolder: the folder cannot be written.
        """
        sha = hashlib.sha256(data).hexdigest()
        final = self.path(sha)
        with (
            refusing_read_only(self.directory),
            disk_full_as_typed("the attachment could not be stored: the disk is full", sha256=sha),
        ):
            if self._holds(final, sha, len(data)):
                with contextlib.suppress(OSError):
                    os.utime(final)
                return sha
            self._make_folders(final.parent)
            tmp = self.incoming / f"{sha}.{os.getpid()}-{secrets.token_hex(4)}"
            try:
                write_durably(tmp, data)
                os.replace(tmp, final)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            fsync_dir(final.parent)
        return sha

    def _make_folders(self, parent: Path) -> None:
        """Create ``incoming/`` and the blob's folder, each made durable in its parent."""
        for folder in (self.directory, self.incoming, self.blobs, parent):
            if folder.is_dir():
                continue
            with contextlib.suppress(FileExistsError):
                folder.mkdir(mode=0o700)
            fsync_dir(folder.parent)

    @staticmethod
    def _holds(path: Path, sha: str, size: int) -> bool:
        try:
            return os.lstat(path).st_size == size and _hash_file(path) == sha
        except OSError:
            return False

    def read(self, sha256: str) -> bytes:
        """The bytes of blob ``sha256``, checked against their name.

        Raises:
            AttachmentMissing: no such blob, or its bytes are damaged.
        """
        path = self.path(sha256)
        try:
            fd = open_no_follow(path, os.O_RDONLY)
        except OSError as exc:
            raise AttachmentMissing(f"attachment {sha256} is missing", sha256=sha256) from exc
        with os.fdopen(fd, "rb") as handle:
            data = handle.read()
        if hashlib.sha256(data).hexdigest() != sha256:
            raise AttachmentMissing(
                f"attachment {sha256} is damaged", sha256=sha256, problem="damaged"
            )
        return data

    def check(self, ref: AttachmentRef) -> BlobProblem | None:
        """``None`` when the blob is there with the bytes its reference names."""
        try:
            path = self.path(ref.sha256)
            size = os.lstat(path).st_size
        except (OSError, BranchwiseError):
            return BlobProblem(ref, "missing")
        try:
            if size != ref.size or _hash_file(path) != ref.sha256:
                return BlobProblem(ref, "damaged")
        except OSError:
            return BlobProblem(ref, "missing")
        return None

    def stored(self) -> Iterator[Path]:
        """Every blob and temporary file in the folder."""
        for folder in (self.blobs, self.incoming):
            if not folder.is_dir():
                continue
            for entry in sorted(folder.iterdir()):
                if entry.is_dir() and not entry.is_symlink():
                    yield from sorted(entry.iterdir())
                else:
                    yield entry

    def collect(
        self, referenced: Iterable[str], *, grace: float = COLLECT_GRACE, now: float | None = None
    ) -> list[str]:
        """Remove every blob not in ``referenced`` and older than ``grace`` seconds.

        ``referenced`` must name every blob any session refers to, the Trash
        included (:func:`referenced_blobs`). Temporary files of interrupted
        writes go too, past the same grace period. Returns the names removed.
        """
        keep = set(referenced)
        cutoff = (time.time() if now is None else now) - grace
        removed: list[str] = []
        for path in list(self.stored()):
            if path.name in keep:
                continue
            try:
                if os.lstat(path).st_mtime > cutoff:
                    continue
                os.unlink(path)
            except OSError:
                continue
            removed.append(path.name)
        return removed


def _hash_file(path: Path) -> str:
    fd = open_no_follow(path, os.O_RDONLY)
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
