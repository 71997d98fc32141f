"""The whole lineage tree of a conversation as a ChatGPT ``conversations.json``.

``branchwise import`` reads the file back as the same tree. Each message is
written from what its log recorded (its own seq and time, tool calls and
their results apart), read through the projection's
:func:`~branchwise.core.projection.records.recorded_entries` hook.
"""

from __future__ import annotations

from typing import Any

import orjson

from branchwise.core.conversation.export.common import readable_snapshot
from branchwise.core.ids import validate_session_id
from branchwise.core.lineage import TreeNode, lineage, tree
from branchwise.core.projection.records import Entry, EntryKind, recorded_entries
from branchwise.core.store.store import SessionStore


def export_chatgpt(store: SessionStore, session_id: str) -> list[dict[str, Any]]:
    """The whole lineage tree of ``session_id`` as a ChatGPT ``conversations.json`` array.

    The root and every fork below it are ONE conversation: one ``mapping`` in
    which a fork's own messages hang under the last message of the turn it
    forked at (a fork at the start under the hidden root node), and
    ``current_node`` is the root conversation's last message, so importing
    the file gives back the same tree. A regenerate branch's repeated prompt
    is not repeated: its answer hangs under the parent's prompt, as ChatGPT
    keeps a regenerated answer. A prompt's files are
    image references and ``metadata.attachments`` (:func:`_with_files`).
    Tool calls are assistant messages addressed to
    the tool, each followed by its results as ``tool`` messages (parallel
    calls too: ChatGPT pairs a result with the call above it). Child conversations (sub-agents)
    have no place in a ChatGPT tree: each becomes a conversation of its own in
    the same array, after the tree it belongs to.

    A ``conversations.json`` has no place to say it is incomplete, so a
    damaged session anywhere in the tree is always refused.

    Raises:
        CorruptLog: a session of the tree is damaged.
        InvalidSessionId, SessionNotFound, InvalidManifest: from the store.
    """
    chain = lineage(store, validate_session_id(session_id)).chain
    top = tree(store, chain[-1].session_id)
    conversations: list[dict[str, Any]] = []
    pending = [top]
    while pending:
        root = pending.pop(0)
        conversation, children = _chatgpt_conversation(store, root)
        conversations.append(conversation)
        pending.extend(children)
    return conversations


def _chatgpt_conversation(
    store: SessionStore, top: TreeNode
) -> tuple[dict[str, Any], list[TreeNode]]:
    """One ChatGPT conversation from ``top`` and its forks; the child trees left over."""
    root_node = f"{top.manifest.session_id}-root"
    mapping: dict[str, dict[str, Any]] = {
        root_node: {"id": root_node, "message": None, "parent": None, "children": []}
    }
    # per session: seq -> node id of the message it wrote (or inherited), and turn -> prompt node
    nodes_by_session: dict[str, dict[int, str]] = {}
    prompts_by_session: dict[str, dict[str, tuple[str, str]]] = {}
    children: list[TreeNode] = []
    current = root_node
    stack = [top]
    while stack:
        node = stack.pop()
        manifest = node.manifest
        if node is not top and manifest.kind == "child":
            children.append(node)
            continue
        stack.extend(reversed(node.children))
        snapshot = readable_snapshot(store, manifest.session_id, partial=False)
        link = manifest.parent if node is not top else None
        seed = manifest.seed_length if link is not None else 0
        nodes: dict[int, str] = {}
        prompts: dict[str, tuple[str, str]] = {}
        above = root_node
        skip_prompt: str | None = None
        if link is not None and link.session_id in nodes_by_session:
            parent_nodes = nodes_by_session[link.session_id]
            parent_prompts = prompts_by_session[link.session_id]
            inherited = [seq for seq in parent_nodes if seq <= seed]
            nodes.update({seq: parent_nodes[seq] for seq in inherited})
            prompts.update(parent_prompts)
            above = parent_nodes[max(inherited)] if inherited else root_node
            origin = link.origin
            if (
                origin is not None
                and origin.kind == "regenerate"
                and origin.turn_id in parent_prompts
            ):
                prompt_node, prompt_text = parent_prompts[origin.turn_id]
                if prompt_text == origin.prompt:
                    skip_prompt = prompt_node
        for entry in _calls_then_results(recorded_entries(snapshot.scan, after=seed)):
            message = _chatgpt_message(entry)
            if message is None:
                continue
            prompt = entry.kind is EntryKind.PROMPT
            if skip_prompt is not None and prompt:
                above, skip_prompt = skip_prompt, None  # the regenerated answer hangs under it
                nodes[entry.seq] = above
                continue
            node_id = f"{manifest.session_id}-{entry.seq}"
            message["id"] = node_id
            mapping[node_id] = {"id": node_id, "message": message, "parent": above, "children": []}
            mapping[above]["children"].append(node_id)
            if prompt:
                prompts[entry.turn_id] = (node_id, entry.text)
            nodes[entry.seq] = node_id
            above = node_id
        nodes_by_session[manifest.session_id] = nodes
        prompts_by_session[manifest.session_id] = prompts
        if node is top:
            current = above
    created = top.manifest.created_at
    conversation = {
        "title": top.manifest.title,
        "create_time": created,
        "update_time": created,
        "mapping": mapping,
        "current_node": current,
        "conversation_id": top.manifest.session_id,
        "id": top.manifest.session_id,
    }
    return conversation, children


def _calls_then_results(entries: list[Entry]) -> list[Entry]:
    """The entries with each tool call followed at once by its results, in their order.

    ChatGPT pairs a ``tool`` message with the call it hangs under (it has no
    call ids), so parallel calls written as recorded (call, call, result,
    result) would pair every result with the last call. A result whose call is
    not among ``entries`` stays where it was.
    """
    results: dict[str, list[Entry]] = {}
    calls = {e.call_id for e in entries if e.kind is EntryKind.TOOL_CALL and e.call_id}
    for entry in entries:
        if entry.kind is EntryKind.TOOL_RESULT and entry.call_id in calls:
            results.setdefault(entry.call_id, []).append(entry)
    ordered: list[Entry] = []
    for entry in entries:
        if entry.kind is EntryKind.TOOL_RESULT and entry.call_id in calls:
            continue  # written right after its call
        ordered.append(entry)
        if entry.kind is EntryKind.TOOL_CALL and entry.call_id:
            ordered += results.pop(entry.call_id, [])
    return ordered


def _with_files(entry: Entry) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A prompt with files as ChatGPT writes one: ``multimodal_text`` whose image parts
    point at files (``file-service://file-<hash>``), and ``metadata.attachments`` naming
    every file. The bytes stay in Branchwise (``session attachment`` writes one out)."""
    parts: list[Any] = []
    files = []
    for ref in entry.attachments:
        file_id = f"file-{ref.sha256[:24]}"
        files.append({"id": file_id, "name": ref.name, "size": ref.size, "mimeType": ref.type})
        if ref.is_image:
            parts.append(
                {
                    "content_type": "image_asset_pointer",
                    "asset_pointer": f"file-service://{file_id}",
                    "size_bytes": ref.size,
                    "metadata": {"sha256": ref.sha256, "name": ref.name},
                }
            )
    parts.append(entry.text)
    return {"content_type": "multimodal_text", "parts": parts}, files


def _chatgpt_message(entry: Entry) -> dict[str, Any] | None:
    """A ChatGPT ``message`` for one entry, ``None`` for what ChatGPT does not show."""
    role, recipient, name = "assistant", "all", None
    metadata: dict[str, Any] = {}
    if entry.kind is EntryKind.PROMPT:
        role = "user"
        content: dict[str, Any] = {"content_type": "text", "parts": [entry.text]}
        if entry.attachments:
            content, metadata["attachments"] = _with_files(entry)
    elif entry.kind is EntryKind.ANSWER:
        if entry.partial:
            return None
        content = {"content_type": "text", "parts": [entry.text]}
        metadata["model_slug"] = entry.model
    elif entry.kind is EntryKind.TOOL_CALL:
        args = entry.data
        text = args if isinstance(args, str) else orjson.dumps(args).decode()
        content = {"content_type": "code", "language": "unknown", "text": text}
        recipient = str(entry.name or "tool")
    else:
        role, name = "tool", entry.name
        output = entry.data
        text = output if isinstance(output, str) else orjson.dumps(output).decode()
        content = {"content_type": "execution_output", "text": text}
    return {
        "id": None,
        "author": {"role": role, "name": name, "metadata": {}},
        "create_time": entry.at,
        "update_time": None,
        "content": content,
        "status": "finished_successfully",
        "end_turn": True,
        "weight": 1.0,
        "metadata": metadata,
        "recipient": recipient,
    }
