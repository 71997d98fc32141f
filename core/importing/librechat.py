"""LibreChat conversation exports (JSON) as source trees.

LibreChat exports one conversation per file: ``{conversationId, title,
endpoint, options, recursive, messagesTree | messages}``. With ``recursive``
the messages nest under their parents' ``children``; without it they are a
flat list linked by ``parentMessageId``. A root's parent is the all-zero id.
LibreChat names no current leaf: its UI shows the newest sibling at every
level, which is the main rule here too. A file holding an array of such
conversations is read the same way, one at a time.

A message is the user's when ``isCreatedByUser``; otherwise ``model`` (or the
conversation's model, or ``sender``) names who answered. Its text is ``text``,
or for agents and assistants a ``content`` array of parts: ``text`` (a string
or ``{value}``), ``think`` (hidden), ``tool_call`` (its call and its output).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from branchwise.core.importing.json_stream import export_records, head, top_level
from branchwise.core.importing.message_parts import Part, chain
from branchwise.core.importing.source import (
    SourceItem,
    SourceRecord,
    SourceSkip,
    SourceTree,
    SourceWarning,
)

FORMAT = "librechat"

NO_PARENT = "00000000-0000-0000-0000-000000000000"


def sniff(path: Path) -> bool:
    """Whether ``path`` starts like a LibreChat export."""
    sample = head(path)
    return (
        top_level(sample) is not None
        and b'"conversationId"' in sample
        and (b'"parentMessageId"' in sample or b'"messagesTree"' in sample)
    )


def read(path: Path) -> Iterator[SourceRecord]:
    """Every conversation of the export at ``path``.

    Raises:
        MalformedImport: the file is not JSON, or breaks off before its first conversation.
    """
    return export_records(path, "a LibreChat export", _conversation)


def _conversation(location: str, value: Any) -> Iterator[SourceRecord]:
    messages = None
    if isinstance(value, dict):
        messages = value.get("messagesTree")
        if not isinstance(messages, list):
            messages = value.get("messages")
    if not isinstance(value, dict) or not isinstance(messages, list) or not messages:
        yield SourceSkip(source=location, reason="no messages")
        return
    options = value.get("options") if isinstance(value.get("options"), dict) else {}
    assert isinstance(options, dict)
    default_model = options.get("model") if isinstance(options.get("model"), str) else None
    items: list[SourceItem] = []
    times: list[float] = []
    for message, nesting_parent in _flatten(messages):
        if not isinstance(message, dict) or not isinstance(message.get("messageId"), str):
            yield SourceWarning(f"{location}: a message without messageId, ignored")
            continue
        made = _message(message, nesting_parent, default_model)
        items.extend(made)
        if made[-1].time is not None:
            times.append(made[-1].time)
    conversation_id = value.get("conversationId")
    title = value.get("title")
    yield SourceTree(
        format=FORMAT,
        id=conversation_id if isinstance(conversation_id, str) else location,
        title=title if isinstance(title, str) else "",
        created=min(times) if times else None,
        items=tuple(items),
        main_rule="newest_sibling",
        location=location,
    )


def _flatten(messages: list[Any]) -> Iterator[tuple[Any, str | None]]:
    """Each message with the id of the message it is nested under (none when flat).

    Iterative, parents before children: a recursive export nests two levels per
    message, and a long conversation must not hit Python's recursion limit.
    """
    pending: list[tuple[Any, str | None]] = [(m, None) for m in reversed(messages)]
    while pending:
        message, parent = pending.pop()
        yield message, parent
        children = message.get("children") if isinstance(message, dict) else None
        if isinstance(children, list) and children:
            own = message.get("messageId")
            pending.extend((c, own if isinstance(own, str) else None) for c in reversed(children))


def _message(
    message: dict[str, Any], nesting_parent: str | None, default_model: str | None
) -> list[SourceItem]:
    message_id = message["messageId"]
    parent = nesting_parent or message.get("parentMessageId")
    if not isinstance(parent, str) or parent == NO_PARENT:
        parent = None
    time = _time(message.get("createdAt"))
    if time is None:
        time = _time(message.get("updatedAt"))
    by_user = bool(message.get("isCreatedByUser"))
    parts = _parts(message)
    if by_user:
        return chain(message_id, parent, "user", parts, time=time, model=None)
    model = message.get("model")
    if not isinstance(model, str) or not model:
        sender = message.get("sender")
        model = default_model or (sender if isinstance(sender, str) else None)
    return chain(message_id, parent, "assistant", parts, time=time, model=model)


def _parts(message: dict[str, Any]) -> list[Part]:
    content = message.get("content")
    if not isinstance(content, list) or not content:
        text = message.get("text")
        return [Part(kind="text", text=text if isinstance(text, str) else "")]
    parts: list[Part] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if isinstance(text, dict):
                text = text.get("value")
            parts.append(Part(kind="text", text=text if isinstance(text, str) else ""))
        elif kind == "tool_call" and isinstance(part.get("tool_call"), dict):
            call = part["tool_call"]
            call_id = call.get("id") if isinstance(call.get("id"), str) else None
            name = call.get("name") if isinstance(call.get("name"), str) else None
            arguments = call.get("args")
            parts.append(
                Part(
                    kind="tool_call",
                    text=name or "",
                    call_id=call_id,
                    tool_name=name,
                    arguments=(
                        arguments
                        if isinstance(arguments, str) or arguments is None
                        else json.dumps(arguments, ensure_ascii=False)
                    ),
                )
            )
            output = call.get("output")
            if output is not None:
                parts.append(
                    Part(
                        kind="tool_result",
                        text=output if isinstance(output, str) else json.dumps(output),
                        call_id=call_id,
                    )
                )
        elif kind == "error" and isinstance(part.get("error"), str):
            parts.append(Part(kind="text", text=part["error"]))
        # "think", images, agent updates: not shown
    return parts


def _time(value: object) -> float | None:
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) / 1000.0 if value > 1e11 else float(value)
    return None
