"""What a log recorded, message by message: a hook for readers that need more than the state.

The :class:`~branchwise.core.projection.projection.Projection` keeps what a
conversation *is* now: one text per message, usage totals, tool calls folded
into one line. An export to another app's format needs what was *recorded*:
each prompt, answer, tool call and tool result with its own seq and time, and
the usage each turn reported. Reading that here keeps the event vocabulary
in this package: exports ask for entries and never name an event kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from branchwise.core.log.scan import LogScan
from branchwise.core.projection.attachments import AttachmentRef, attachments_of
from branchwise.core.projection.events import EventType

_TURN_START = EventType.TURN_START.value
_USAGE = EventType.USAGE.value


class EntryKind(StrEnum):
    """What a recorded message was."""

    PROMPT = "prompt"
    ANSWER = "answer"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"


_KINDS = {
    EventType.MESSAGE_USER.value: EntryKind.PROMPT,
    EventType.MESSAGE_ASSISTANT.value: EntryKind.ANSWER,
    EventType.TOOL_CALL.value: EntryKind.TOOL_CALL,
    EventType.TOOL_RESULT.value: EntryKind.TOOL_RESULT,
}


@dataclass(frozen=True, slots=True)
class Entry:
    """One recorded message, as its event wrote it.

    Attributes:
        seq: the event's seq (unique in its log; a fork shares its parent's up to its seed).
        at: when it was written (seconds since the epoch; ``None`` if not stamped).
        turn_id: the turn started last before it (``""`` before any turn).
        kind: prompt, answer, tool call or tool result.
        text: a prompt's or an answer's text (``""`` for tool entries).
        model: the model that wrote an answer.
        partial: an answer's mid-stream checkpoint, not its final text.
        name: a tool call's (or result's) tool name.
        data: a tool call's arguments or a tool result's output, as recorded.
        call_id: the call a tool call opens or a tool result answers (``None`` otherwise).
        attachments: the files a prompt carries.
    """

    seq: int
    at: float | None
    turn_id: str
    kind: EntryKind
    text: str = ""
    model: str | None = None
    partial: bool = False
    name: str | None = None
    data: Any = None
    call_id: str | None = None
    attachments: tuple[AttachmentRef, ...] = ()


def recorded_entries(scan: LogScan, *, after: int = 0) -> list[Entry]:
    """Every prompt, answer, tool call and tool result of ``scan`` with a seq above ``after``.

    Args:
        scan: a read of the log (a snapshot's ``scan``): its whole committed frames.
        after: a fork's seed length: what it inherited is its parent's record.
    """
    found: list[Entry] = []
    turn_id = ""
    for frame in scan.frames:
        for event in frame.events:
            seq = event["seq"]
            if seq <= after:
                continue
            kind = event["type"]
            if kind == _TURN_START:
                turn_id = event["turnId"]
                continue
            entry_kind = _KINDS.get(kind)
            if entry_kind is None:
                continue
            at = event.get("ts")
            if entry_kind is EntryKind.TOOL_CALL:
                data, name, text = event.get("args"), event.get("name"), ""
            elif entry_kind is EntryKind.TOOL_RESULT:
                data, name, text = event.get("output"), event.get("name"), ""
            else:
                data, name, text = None, None, event.get("content", "")
            found.append(
                Entry(
                    seq=seq,
                    at=at,
                    turn_id=turn_id,
                    kind=entry_kind,
                    text=text,
                    model=event.get("model"),
                    partial=bool(event.get("partial")),
                    name=name,
                    data=data,
                    call_id=event.get("callId"),
                    attachments=attachments_of(event) if entry_kind is EntryKind.PROMPT else (),
                )
            )
    return found


@dataclass(frozen=True, slots=True)
class TurnUsage:
    """The tokens one turn reported (only what it paid for: not a fork's inherited usage)."""

    input_tokens: int = 0
    output_tokens: int = 0

    def to_json(self) -> dict[str, int]:
        """``{"inputTokens", "outputTokens"}``."""
        return {"inputTokens": self.input_tokens, "outputTokens": self.output_tokens}


def usage_by_turn(scan: LogScan, *, after: int = 0) -> dict[str, TurnUsage]:
    """Tokens per turn id of ``scan``, counted as the projection counts totals (after ``after``).

    Usage belongs to the turn started last before it, so a usage record
    written after its turn ended still counts for that turn.
    """
    counts: dict[str, list[int]] = {}
    current: str | None = None
    for frame in scan.frames:
        for event in frame.events:
            kind = event["type"]
            if kind == _TURN_START:
                current = event["turnId"]
            elif kind == _USAGE and current is not None and event["seq"] > after:
                pair = counts.setdefault(current, [0, 0])
                pair[0] += int(event.get("inputTokens", 0))
                pair[1] += int(event.get("outputTokens", 0))
    return {turn: TurnUsage(i, o) for turn, (i, o) in counts.items()}
