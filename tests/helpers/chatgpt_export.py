"""Build ChatGPT data exports (``conversations.json``, the export ``.zip``) for tests.

The shapes follow the public export: a JSON array of conversations, each with
``mapping`` (node id -> ``{id, message, parent, children}``), ``current_node``,
``title``, ``create_time`` and ``conversation_id``. Written from scratch.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import orjson


def message(
    role: str,
    text: str | None = None,
    *,
    time: float | None = None,
    content: dict[str, Any] | None = None,
    recipient: str = "all",
    model: str | None = None,
    name: str | None = None,
    hidden: bool = False,
) -> dict[str, Any]:
    """One ``message`` object; ``content`` overrides the plain text content."""
    metadata: dict[str, Any] = {}
    if model is not None:
        metadata["model_slug"] = model
    if hidden:
        metadata["is_visually_hidden_from_conversation"] = True
    return {
        "id": None,
        "author": {"role": role, "name": name, "metadata": {}},
        "create_time": time,
        "update_time": None,
        "content": content or {"content_type": "text", "parts": [text or ""]},
        "status": "finished_successfully",
        "end_turn": True,
        "weight": 1.0,
        "metadata": metadata,
        "recipient": recipient,
        "channel": None,
    }


def conversation(
    conversation_id: str,
    title: str,
    nodes: list[tuple[str, str | None, dict[str, Any] | None]],
    *,
    current: str | None = None,
    create_time: float | None = 1_700_000_000.0,
) -> dict[str, Any]:
    """A conversation from ``(node id, parent id, message or None)`` rows, children filled in."""
    mapping: dict[str, Any] = {}
    for node_id, parent, body in nodes:
        if body is not None:
            body = {**body, "id": node_id}
        mapping[node_id] = {"id": node_id, "message": body, "parent": parent, "children": []}
    for node_id, parent, _ in nodes:
        if parent is not None and parent in mapping:
            mapping[parent]["children"].append(node_id)
    return {
        "title": title,
        "create_time": create_time,
        "update_time": create_time,
        "mapping": mapping,
        "moderation_results": [],
        "current_node": current if current is not None else nodes[-1][0],
        "plugin_ids": None,
        "conversation_id": conversation_id,
        "conversation_template_id": None,
        "gizmo_id": None,
        "is_archived": False,
        "safe_urls": [],
        "default_model_slug": "gpt-4o",
        "id": conversation_id,
    }


def linear(
    conversation_id: str, turns: int, *, text: str = "hello", start: float = 1.0
) -> dict[str, Any]:
    """A conversation of ``turns`` prompt/answer pairs under the usual hidden system root."""
    rows: list[tuple[str, str | None, dict[str, Any] | None]] = [
        (f"{conversation_id}-root", None, None),
        (f"{conversation_id}-sys", f"{conversation_id}-root", message("system", "", hidden=True)),
    ]
    parent = f"{conversation_id}-sys"
    for n in range(turns):
        user, answer = f"{conversation_id}-u{n}", f"{conversation_id}-a{n}"
        rows.append((user, parent, message("user", f"{text} {n}", time=start + 2 * n)))
        rows.append(
            (
                answer,
                user,
                message("assistant", f"answer {n}: {text}", time=start + 2 * n + 1, model="gpt-4o"),
            )
        )
        parent = answer
    return conversation(conversation_id, f"Conversation {conversation_id}", rows)


def write_export(path: Path, conversations: list[dict[str, Any]]) -> Path:
    """``conversations.json`` at ``path``."""
    path.write_bytes(orjson.dumps(conversations))
    return path


def write_zip(
    path: Path, conversations: list[dict[str, Any]], member: str = "conversations.json"
) -> Path:
    """An export ``.zip`` holding ``conversations.json`` (and a chat.html, as real ones do)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(member, orjson.dumps(conversations))
        archive.writestr("chat.html", "<html></html>")
    return path
