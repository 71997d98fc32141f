"""``branchwise session attachment|collect-attachments`` and the ``--attach`` option.

``--attach FILE…`` (on ``say`` and ``edit``) reads, judges and stores the
files before the prompt's commit refers to them
(:func:`~branchwise.core.conversation.attachments.attach_files`); a refused
file stops the command before anything is written. ``session attachment ID
SHA256 --out FILE`` writes one attachment of a conversation out, checked
against its hash; ``session collect-attachments`` frees the blobs no
conversation refers to any more.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from branchwise.core.cli.models import attachment_limits
from branchwise.core.conversation.attachments import attach_files
from branchwise.core.errors import AttachmentMissing, OutputExists
from branchwise.core.ids import validate_session_id
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.store.attachments import BlobStore
from branchwise.core.store.blob_collection import collect_blobs
from branchwise.core.store.store import SessionStore


def register(session_sub: argparse._SubParsersAction) -> None:
    """Add ``attachment`` and ``collect-attachments`` under ``session``."""
    attachment = session_sub.add_parser(
        "attachment", help="write one attachment of a conversation to a file"
    )
    attachment.add_argument("session_id")
    attachment.add_argument("sha256", help="the attachment's hash (as session show lists it)")
    attachment.add_argument("--out", required=True, help="the file to write (must not exist)")
    attachment.set_defaults(func=cmd_attachment)

    collect = session_sub.add_parser(
        "collect-attachments",
        help="free stored attachments no conversation (nor the Trash) refers to",
    )
    collect.set_defaults(func=cmd_collect)


def add_attach_option(parser: argparse.ArgumentParser) -> None:
    """``--attach FILE…``: files sent with the prompt."""
    parser.add_argument(
        "--attach",
        nargs="+",
        default=[],
        metavar="FILE",
        help="attach files (images, text, PDF) to the prompt",
    )


def attached(store: SessionStore, args: argparse.Namespace) -> tuple[AttachmentRef, ...]:
    """The ``--attach`` files, stored durably; ``()`` without the option.

    Raises:
        AttachmentRefused: a file that cannot be attached (nothing is stored).
        DiskFull, ReadOnlyDataFolder: the blob folder cannot take them.
    """
    paths = [Path(path) for path in getattr(args, "attach", []) or []]
    if not paths:
        return ()
    return attach_files(store.root, paths, attachment_limits(store, args))


def cmd_attachment(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """``{"sessionId", "sha256", "name", "type", "size", "path"}``: one attachment written out.

    Raises:
        AttachmentMissing: the conversation has no such attachment, or its bytes are gone.
        OutputExists: ``--out`` exists (never overwritten).
    """
    session_id = validate_session_id(args.session_id)
    projection = store.read(session_id, every_frame=False).projection
    ref = next((r for r in projection.attachment_refs() if r.sha256 == args.sha256), None)
    if ref is None:
        raise AttachmentMissing(
            f"conversation {session_id} has no attachment {args.sha256}",
            sessionId=session_id,
            sha256=str(args.sha256),
        )
    data = BlobStore(store.root).read(ref.sha256)
    out = Path(args.out)
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise OutputExists(f"{out} already exists", path=str(out)) from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return {
        "sessionId": session_id,
        "sha256": ref.sha256,
        "name": ref.name,
        "type": ref.type,
        "size": ref.size,
        "path": str(out),
    }


def cmd_collect(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """``{"removed", "kept", "unreadable"}`` (nothing is freed while a session is unreadable)."""
    return collect_blobs(store).to_json()
