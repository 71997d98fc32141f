"""One source message made of text and tool parts, as a chain of source items.

Open WebUI and LibreChat store an assistant answer that used tools as one
message whose parts interleave text, tool calls and tool results. Branchwise
items are one thing each, so the message becomes a chain: text runs become
assistant items, each call and result its own item, in the order written.
The last item of the chain carries the message's own id, so the source's
children (which name that id as their parent) hang below the whole answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from branchwise.core.importing.source import ItemKind, SourceItem


@dataclass(frozen=True, slots=True)
class Part:
    """One part of a message, in the order the source wrote it.

    Attributes:
        kind: ``"text"``, ``"tool_call"`` or ``"tool_result"``.
        text: the text, the call's short description, or the result's output.
        call_id: pairs a call with its result.
        tool_name: the tool a call invokes.
        arguments: a call's arguments as the source wrote them.
    """

    kind: str
    text: str = ""
    call_id: str | None = None
    tool_name: str | None = None
    arguments: str | None = None


def chain(
    message_id: str,
    parent: str | None,
    role: ItemKind,
    parts: list[Part],
    *,
    time: float | None,
    model: str | None,
) -> list[SourceItem]:
    """The items of one message, the last one carrying ``message_id``.

    ``role`` is the kind of the text runs (``"user"`` or ``"assistant"``); a
    message with no part at all is one item of that kind with empty text.
    """
    runs: list[tuple[ItemKind, Part]] = []
    for part in parts:
        if part.kind == "text":
            if runs and runs[-1][0] == role:
                merged = runs[-1][1].text + "\n\n" + part.text if runs[-1][1].text else part.text
                runs[-1] = (role, Part(kind="text", text=merged))
            elif part.text:
                runs.append((role, part))
        elif part.kind in ("tool_call", "tool_result"):
            runs.append(("tool_call" if part.kind == "tool_call" else "tool_result", part))
    if not runs:
        runs.append((role, Part(kind="text")))
    items: list[SourceItem] = []
    for index, (kind, part) in enumerate(runs):
        last = index == len(runs) - 1
        items.append(
            SourceItem(
                id=message_id if last else f"{message_id}#{index}",
                parent=items[-1].id if items else parent,
                kind=kind,
                text=part.text,
                time=time,
                model=model if kind != "user" else None,
                call_id=part.call_id,
                tool_name=part.tool_name,
                arguments=part.arguments,
            )
        )
    return items


def seconds(value: object) -> float | None:
    """A source time as seconds since the epoch: seconds, milliseconds or nanoseconds by size."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    if number > 1e17:
        return number / 1e9
    if number > 1e14:
        return number / 1e6
    if number > 1e11:
        return number / 1e3
    return number
