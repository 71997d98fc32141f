"""Open WebUI chat exports as source trees.

An export (Settings ▸ Chats ▸ Export, or one chat's Download ▸ JSON) is an
array of chat rows ``{id, title, chat: {history: {messages, currentId}},
created_at, …}``. Chats kept in the browser (the local-storage chats Open
WebUI offers to download, and the rows its own importer calls the legacy
format) are bare chat objects ``{id, title, history, messages, timestamp}``:
the chat without its row, read the same way, alone or in an array.

The tree is ``chat.history.messages``: message id →
``{id, parentId, childrenIds, role, content, model, timestamp}``. An edited
first prompt is a second root (``parentId: null``); answers of several models
to one prompt are siblings, each with its ``model``.

Newer versions also write an ``output`` list per answer (reasoning, function
calls and their outputs, message text); older ones put tool calls and
reasoning into the content as ``<details type="tool_calls" …>`` and
``<details type="reasoning">`` blocks. Either way reasoning is hidden and tool
calls become their own items.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from branchwise.core.importing.json_stream import export_records, head, top_level
from branchwise.core.importing.message_parts import Part, chain, seconds
from branchwise.core.importing.source import (
    SourceItem,
    SourceRecord,
    SourceSkip,
    SourceTree,
    SourceWarning,
)

FORMAT = "open-webui"

_DETAILS = re.compile(r"<details\b([^>]*)>(.*?)</details>", re.DOTALL)
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')


def sniff(path: Path) -> bool:
    """Whether ``path`` starts like an Open WebUI export (a chat row with a message history)."""
    sample = head(path)
    return (
        top_level(sample) is not None
        and b'"history"' in sample
        and (b'"childrenIds"' in sample or b'"currentId"' in sample)
    )


def read(path: Path) -> Iterator[SourceRecord]:
    """Every chat of the export at ``path``, one at a time.

    Raises:
        MalformedImport: the file is not JSON, or breaks off before its first chat.
    """
    return export_records(path, "an Open WebUI export", _chat)


NO_TREE = (
    'no message tree: expected a chat row {"chat": {"history": {"messages": {…}}}} '
    'or a chat {"history": {"messages": {…}}}'
)


def _chat(location: str, row: Any) -> Iterator[SourceRecord]:
    chat = row.get("chat") if isinstance(row, dict) else None
    if isinstance(row, dict) and not isinstance(chat, dict) and _is_chat(row):
        chat, row = row, {}  # a bare chat object: the chat without its row
    history = chat.get("history") if isinstance(chat, dict) else None
    history = history if isinstance(history, dict) else {}
    messages = history.get("messages")
    if not isinstance(messages, dict) and isinstance(chat, dict):
        # Early versions kept only the flat list, each message still naming its parent.
        flat = chat.get("messages")
        if isinstance(flat, list) and all(isinstance(m, dict) and "parentId" in m for m in flat):
            messages = {str(m.get("id") or n): m for n, m in enumerate(flat)}
    if not isinstance(row, dict) or not isinstance(messages, dict) or not messages:
        yield SourceSkip(source=location, reason=NO_TREE)
        return
    assert isinstance(chat, dict)
    items: list[SourceItem] = []
    for key, message in messages.items():
        if not isinstance(message, dict):
            yield SourceWarning(f"{location}: message {key} is not an object, ignored")
            continue
        items.extend(_message(str(message.get("id") or key), message))
    chat_id = row.get("id") or chat.get("id")
    title = row.get("title") or chat.get("title") or ""
    current = history.get("currentId")
    created = seconds(row.get("created_at")) or seconds(chat.get("timestamp"))
    yield SourceTree(
        format=FORMAT,
        id=str(chat_id) if chat_id else location,
        title=str(title),
        created=created,
        items=tuple(items),
        current=current if isinstance(current, str) else None,
        location=location,
    )


def _is_chat(value: dict[str, Any]) -> bool:
    """Whether ``value`` is a chat object itself (its ``history``, or the early flat list)."""
    return isinstance(value.get("history"), dict) or isinstance(value.get("messages"), list)


def _message(message_id: str, message: dict[str, Any]) -> list[SourceItem]:
    parent = message.get("parentId")
    parent = parent if isinstance(parent, str) else None
    role = message.get("role")
    time = seconds(message.get("timestamp"))
    if role == "user":
        return chain(
            message_id, parent, "user", [_text(message.get("content"))], time=time, model=None
        )
    if role != "assistant":
        # System prompts and anything this reader does not know: hidden, children pass through.
        return [SourceItem(id=message_id, parent=parent, kind=None, time=time)]
    model = message.get("modelName") or message.get("model")
    output = message.get("output")
    parts = _output_parts(output) if isinstance(output, list) and output else None
    if parts is None:
        parts = _content_parts(message.get("content"))
    return chain(
        message_id,
        parent,
        "assistant",
        parts,
        time=time,
        model=str(model) if isinstance(model, str) else None,
    )


def _text(content: object) -> Part:
    if isinstance(content, str):
        return Part(kind="text", text=content)
    if isinstance(content, list):  # OpenAI-style parts: text and image_url
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        return Part(kind="text", text="\n\n".join(t for t in texts if isinstance(t, str)))
    return Part(kind="text")


def _output_parts(output: list[Any]) -> list[Part]:
    parts: list[Part] = []
    for entry in output:
        if not isinstance(entry, dict):
            continue
        kind = entry.get("type")
        if kind == "message":
            parts.append(Part(kind="text", text=_joined(entry.get("content"))))
        elif kind == "function_call":
            arguments = entry.get("arguments")
            name = entry.get("name")
            parts.append(
                Part(
                    kind="tool_call",
                    text=str(name or ""),
                    call_id=_str(entry.get("call_id")),
                    tool_name=_str(name),
                    arguments=arguments if isinstance(arguments, str) else _json(arguments),
                )
            )
        elif kind == "function_call_output":
            output_value = entry.get("output")
            text = output_value if isinstance(output_value, str) else _joined(output_value)
            parts.append(Part(kind="tool_result", text=text, call_id=_str(entry.get("call_id"))))
        # "reasoning" and anything unknown: hidden
    return parts


def _content_parts(content: object) -> list[Part]:
    """Text with ``<details>`` blocks: reasoning dropped, tool calls as call and result parts."""
    if not isinstance(content, str):
        return [_text(content)]
    parts: list[Part] = []
    at = 0
    for block in _DETAILS.finditer(content):
        before = content[at : block.start()].strip()
        if before:
            parts.append(Part(kind="text", text=before))
        at = block.end()
        attributes = {k: html.unescape(v) for k, v in _ATTRIBUTE.findall(block.group(1))}
        if attributes.get("type") != "tool_calls":
            continue  # reasoning, code interpreter status: hidden
        name = attributes.get("name", "")
        call_id = attributes.get("id") or None
        parts.append(
            Part(
                kind="tool_call",
                text=name,
                call_id=call_id,
                tool_name=name or None,
                arguments=attributes.get("arguments"),
            )
        )
        if "result" in attributes:
            result = attributes["result"]
            try:  # Open WebUI stores the result JSON-encoded
                decoded = json.loads(result)
                result = decoded if isinstance(decoded, str) else result
            except ValueError:
                pass
            parts.append(Part(kind="tool_result", text=result, call_id=call_id))
    rest = content[at:].strip()
    if rest:
        parts.append(Part(kind="text", text=rest))
    return parts


def _joined(parts: object) -> str:
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return ""
    texts = [p.get("text") for p in parts if isinstance(p, dict)]
    return "\n\n".join(t for t in texts if isinstance(t, str))


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _json(value: object) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)
