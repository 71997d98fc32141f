"""``branchwise session export ID [--format FORMAT] [--tree] [--out FILE [--overwrite]]``.

Without ``--out`` the export itself is printed: Markdown as text, JSON as
the ``branchwise.export/1`` (or, with ``--tree``, ``branchwise.export-tree/1``)
document. With ``--out`` the file is written atomically and the command prints
``{"exported": PATH, "format": "markdown"|"json", "bytes": N}``; an existing
file is refused with ``output_exists`` unless ``--overwrite`` is given.
``--tree`` is JSON only. A Markdown export's attachments are written into
``<name>-attachments/`` beside ``--out`` and linked from the prompts (the
result then names that folder in ``attachments``); JSON lists them by hash,
with their bytes in base64 under ``--embed-attachments``. Markdown labels
follow ``--lang``. ``chatgpt`` is always the whole lineage tree, as a
ChatGPT ``conversations.json`` array that ``branchwise import`` reads back
as the same tree.

A session whose log is damaged (``corrupt_log``) is refused: its export would
be silently short. ``--partial`` writes what precedes the damage instead,
marked incomplete in the document (JSON ``"complete": false`` and the
``corruption``; a Markdown note under the title). ChatGPT's format has no
place for that mark, so ``--partial`` is Markdown and JSON only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from branchwise.core.conversation.export.chatgpt import export_chatgpt
from branchwise.core.conversation.export.common import FORMATS, write_export
from branchwise.core.conversation.export.json import encode_json, export_document, export_tree
from branchwise.core.conversation.export.markdown import render_markdown, write_attachment_files
from branchwise.core.errors import InvalidArgument
from branchwise.core.ids import validate_session_id
from branchwise.core.store.store import SessionStore


def register(session_sub: argparse._SubParsersAction) -> None:
    """Add ``session export`` under ``session``."""
    export = session_sub.add_parser("export", help="export a session as Markdown or JSON")
    export.add_argument("session_id")
    export.add_argument(
        "--format",
        choices=(*FORMATS, "chatgpt"),
        help="markdown (default), json, or chatgpt (the tree as a conversations.json)",
    )
    export.add_argument(
        "--tree", action="store_true", help="the whole lineage tree as one JSON document"
    )
    export.add_argument("--out", type=Path, help="write this file (atomically) instead of stdout")
    export.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    export.add_argument(
        "--partial",
        action="store_true",
        help="export a damaged session up to the damage, marked incomplete",
    )
    export.add_argument(
        "--embed-attachments",
        action="store_true",
        help="JSON: put each attachment's bytes in the document (base64)",
    )
    export.set_defaults(func=cmd_export)


def cmd_export(store: SessionStore, args: argparse.Namespace) -> dict[str, Any] | int:
    """Render the export, then print it or write it to ``--out``."""
    if args.tree and args.format == "markdown":
        raise InvalidArgument(
            "--tree exports JSON only", argument="--format", value=str(args.format)
        )
    if args.partial and args.format == "chatgpt":
        raise InvalidArgument(
            "--partial exports Markdown or JSON only: a conversations.json cannot say "
            "it is incomplete",
            argument="--partial",
            value="chatgpt",
        )
    session_id = validate_session_id(args.session_id)
    fmt = args.format if args.format == "chatgpt" else "json" if args.tree else args.format
    fmt = fmt or "markdown"
    partial = bool(args.partial)
    if fmt == "chatgpt":
        data = orjson.dumps(export_chatgpt(store, session_id)) + b"\n"
    elif args.tree:
        data = encode_json(export_tree(store, session_id, partial=partial))
    elif fmt == "json":
        document = export_document(store, session_id, partial=partial, embed=args.embed_attachments)
        data = encode_json(document)
    else:
        folder = f"{args.out.stem}-attachments" if args.out is not None else "attachments"
        data = render_markdown(
            store, session_id, partial=partial, attachments_folder=folder
        ).encode()
    if args.out is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return 0
    write_export(args.out, data, overwrite=args.overwrite)
    result: dict[str, Any] = {"exported": str(args.out), "format": fmt, "bytes": len(data)}
    if fmt == "markdown":
        files = write_attachment_files(store, session_id, args.out.parent / folder)
        if files:
            result["attachments"] = str(args.out.parent / folder)
    return result
