"""A conversation as versioned JSON, for programs: one session, or its whole lineage tree.

* :func:`export_document`, schema ``branchwise.export/1``: ``{"schema",
  "exportedAt", "complete", "corruption", "session", "lineage", "turns",
  "messages", "usage"}``. ``complete`` is false only in a ``partial`` export
  of a damaged log, which holds what precedes the damage and names it in
  ``corruption`` (the ``corrupt_log`` error body; ``null`` otherwise).
  Additions keep the version; a change that breaks readers bumps it. A
  message with files lists them in ``attachments`` (by hash, with their
  bytes as ``base64`` when asked).
* :func:`export_tree`, schema ``branchwise.export-tree/1``: the whole lineage
  tree a conversation belongs to, from its furthest reachable ancestor down,
  each session a ``branchwise.export/1`` document without its own ``schema``
  plus ``depth`` and ``childSessionIds``, depth-first; its own ``complete``
  is false when any session's is.

Everything is read from the projection; a turn's usage, which the projection
keeps only as totals, from its :func:`~branchwise.core.projection.records.usage_by_turn` hook.
"""

from __future__ import annotations

import base64
import time
from typing import Any

import orjson

from branchwise.core.conversation.export.common import (
    corruption_json,
    parent_info,
    readable_snapshot,
)
from branchwise.core.errors import AttachmentMissing
from branchwise.core.ids import validate_session_id
from branchwise.core.lineage import lineage, tree
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.projection.records import TurnUsage, usage_by_turn
from branchwise.core.store.attachments import BlobStore
from branchwise.core.store.store import SessionSnapshot, SessionStore

SCHEMA = "branchwise.export/1"
TREE_SCHEMA = "branchwise.export-tree/1"


def attachment_json(store: SessionStore, ref: AttachmentRef, embed: bool) -> dict[str, Any]:
    """A message's file: ``{"name", "type", "size", "sha256"}`` (+ ``pages``), and with
    ``embed`` its bytes as ``base64`` (``null`` when they are missing or damaged)."""
    data = ref.to_json()
    if embed:
        try:
            data["base64"] = base64.b64encode(BlobStore(store.root).read(ref.sha256)).decode()
        except AttachmentMissing:
            data["base64"] = None
    return data


def _document(
    store: SessionStore, snapshot: SessionSnapshot, embed: bool = False
) -> dict[str, Any]:
    """One session's export body (everything but ``schema`` and ``exportedAt``)."""
    manifest, projection = snapshot.manifest, snapshot.projection
    parent = parent_info(store, snapshot)
    chain = lineage(store, manifest.session_id)
    seed = manifest.seed_length
    usage = usage_by_turn(snapshot.scan, after=seed)
    corruption = corruption_json(snapshot)
    return {
        "complete": corruption is None,
        "corruption": corruption,
        "session": {
            "sessionId": manifest.session_id,
            "title": snapshot.title,
            "kind": manifest.kind,
            "createdAt": manifest.created_at,
            "generation": manifest.generation,
            "rootSessionId": manifest.root_session_id or manifest.session_id,
            "seedLength": seed,
        },
        "lineage": {
            "parent": parent.to_json() if parent else None,
            "ancestors": [
                {"sessionId": m.session_id, "title": m.title, "kind": m.kind}
                for m in chain.chain[1:]
            ],
            "complete": chain.broken is None,
        },
        "turns": [
            {
                "number": turn.index,
                "turnId": turn.turn_id,
                "userMessageId": turn.user_message_id,
                "messageId": turn.message_id,
                "boundarySequence": turn.boundary_sequence,
                "endReason": turn.end_reason,
                "error": turn.error,
                "inherited": bool(seed) and turn.start_seq <= seed,
                "usage": usage.get(turn.turn_id, TurnUsage()).to_json(),
            }
            for turn in projection.turns
        ],
        "messages": [
            {
                "messageId": m.message_id,
                "role": m.role,
                "turnId": m.turn_id,
                "content": m.content,
                "model": m.model,
                "partial": m.partial,
                **(
                    {"attachments": [attachment_json(store, a, embed) for a in m.attachments]}
                    if m.attachments
                    else {}
                ),
            }
            for m in projection.messages
        ],
        "usage": {
            "inputTokens": projection.input_tokens,
            "outputTokens": projection.output_tokens,
        },
    }


def export_document(
    store: SessionStore, session_id: str, *, partial: bool = False, embed: bool = False
) -> dict[str, Any]:
    """The ``branchwise.export/1`` JSON document of one session.

    Args:
        partial: export what precedes a damaged log's damage (marked incomplete).
        embed: put each attachment's bytes in the document (base64).

    Raises:
        CorruptLog: the log is damaged and ``partial`` is false.
        InvalidSessionId, SessionNotFound, InvalidManifest: from the store.
    """
    snapshot = readable_snapshot(store, validate_session_id(session_id), partial=partial)
    return {"schema": SCHEMA, "exportedAt": time.time(), **_document(store, snapshot, embed)}


def export_tree(store: SessionStore, session_id: str, *, partial: bool = False) -> dict[str, Any]:
    """The ``branchwise.export-tree/1`` document: the whole tree ``session_id`` belongs to.

    The tree starts at the furthest ancestor still in the session list (a
    trashed or purged ancestor ends the walk up; its branches are still whole).

    Raises:
        CorruptLog: a session of the tree is damaged and ``partial`` is false.
    """
    chain = lineage(store, validate_session_id(session_id)).chain
    top = tree(store, chain[-1].session_id)
    sessions = []
    for node, depth in top.walk():
        snapshot = readable_snapshot(store, node.manifest.session_id, partial=partial)
        sessions.append(
            {
                **_document(store, snapshot),
                "depth": depth,
                "childSessionIds": [c.manifest.session_id for c in node.children],
            }
        )
    return {
        "schema": TREE_SCHEMA,
        "exportedAt": time.time(),
        "complete": all(s["complete"] for s in sessions),
        "rootSessionId": top.manifest.session_id,
        "sessions": sessions,
    }


def encode_json(document: dict[str, Any]) -> bytes:
    """The JSON export's bytes: indented, UTF-8, a final newline."""
    return orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"
