"""What a log's new commits changed, for a reader that keeps its own copy: the catch-up hook.

A reader that caches a conversation elsewhere (the search index) remembers
where it stopped and asks, next time, only what the bytes after that point
changed: the messages whose text is new or grew, the title, the branches
brought back. Replaying the whole log into a
:class:`~branchwise.core.projection.projection.Projection` for that would
read every commit again; this reads only the tail, with the same frame
reader and the same meaning of each event, and so keeps the event vocabulary
in this package.

A streaming answer is committed as growing texts of one message id: in format
2 a partial commit holds only the new text (``message/delta``; the first
names the message, later ones continue the open turn's answer). A tail that
starts inside such an answer's turn continues it: the reader is asked which
answer that turn was streaming and the text it holds for it (``streamed_before``
and ``text_before``), and gets the whole text so far back, so an answer cut
by a crash is found by words that only its deltas hold.

Tool calls and their results are texts too, of role ``tool_call`` (the
tool's name and its arguments as JSON) and ``tool_result`` (the output), so
a search finds what a tool was asked and what it answered. Their message id
is the call's id, as the transcript's ``tool`` message has it; as a call id
may repeat in a log (some servers number calls per answer) and a call may
have several results, each is named within the lineage by its turn, its call
id and, for a result, its seq (``key``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from branchwise.core.log.frames import iter_frames
from branchwise.core.projection.attachments import AttachmentRef, attachments_of
from branchwise.core.projection.events import EventType

_USER = EventType.MESSAGE_USER.value
_ASSISTANT = EventType.MESSAGE_ASSISTANT.value
_DELTA = EventType.MESSAGE_DELTA.value
_TITLE_EVENTS = (EventType.SESSION_CREATED.value, EventType.SESSION_TITLE.value)
_TURN_START = EventType.TURN_START.value
_TURN_END = EventType.TURN_END.value
_LEGACY = EventType.LEGACY_IMPORT.value
_MERGE = EventType.SESSION_MERGE.value
_TOOL_CALL = EventType.TOOL_CALL.value
_TOOL_RESULT = EventType.TOOL_RESULT.value


@dataclass(frozen=True, slots=True)
class TailPosition:
    """Where a reader stopped in a log (its start is ``TailPosition(1, 1, None, title)``).

    Attributes:
        next_commit: the number of the first commit not read yet.
        next_seq: the seq of the first event not read yet.
        open_turn: the turn open after the last commit read.
        title: the title after the last commit read.
    """

    next_commit: int
    next_seq: int
    open_turn: str | None
    title: str


@dataclass(frozen=True, slots=True)
class TailText:
    """A message's whole text after the tail (it is new, or the tail changed it).

    Attributes:
        message_id: the message's id (a fork shares it with its parent).
        role: ``user`` or ``assistant``.
        turn_id: its turn (``None`` for imported history).
        text: its text so far.
        shared: ``False`` for imported history, whose ids are made per log
            (``legacy-<seq>-<n>``) and so name different messages in two logs.
        key: what names the text within its lineage when ``message_id`` does
            not alone (a tool call or result); ``None``: the message id does.
        attachments: the files a prompt carries (a search finds their names and text).
    """

    message_id: str
    role: str
    turn_id: str | None
    text: str
    shared: bool = True
    key: str | None = None
    attachments: tuple[AttachmentRef, ...] = ()


@dataclass(frozen=True, slots=True)
class TailMerge:
    """A branch brought back (``session/merge``) by a commit of the tail."""

    child_session_id: str
    sequence: int
    at: float


@dataclass(frozen=True, slots=True)
class TailRead:
    """What the whole frames of a tail changed.

    Attributes:
        frames: how many whole frames the tail held.
        consumed: bytes of those frames (a torn or growing last frame is not read).
        end: where the next read starts.
        texts: the messages that are new or changed, in the order first seen.
        merges: the branches brought back, in log order.
    """

    frames: int
    consumed: int
    end: TailPosition
    texts: tuple[TailText, ...]
    merges: tuple[TailMerge, ...]


def read_tail(
    data: bytes,
    start: TailPosition,
    *,
    streamed_before: Callable[[str], str | None],
    text_before: Callable[[str], str],
) -> TailRead:
    """Read the whole frames of ``data`` (a log from a frame boundary on) after ``start``.

    Args:
        data: the log's bytes from where the reader stopped.
        start: the position it stopped at.
        streamed_before: the id of the answer a turn (open at ``start``) was
            streaming, as the reader knows it (``None``: it knows none).
        text_before: the text the reader holds for a message id (``""``: none).
    """
    title, open_turn = start.title, start.open_turn
    commit, seq, consumed = start.next_commit, start.next_seq, 0
    latest: dict[tuple[bool, str], list[Any]] = {}  # -> [id, role, turn, text, shared, key]
    growing: dict[tuple[bool, str], list[str]] = {}  # a streaming answer's text, in pieces
    streaming: str | None = None  # the answer the open turn streams, once seen in this tail
    merges: list[TailMerge] = []
    frames = 0
    for frame in iter_frames(data, start=0, first_commit=commit, first_seq=seq):
        frames += 1
        commit, consumed, seq = frame.commit + 1, frame.end, seq + len(frame.events)
        for event in frame.events:
            kind = event.get("type")
            if kind in (_USER, _ASSISTANT):
                message_id, content = event.get("messageId"), event.get("content")
                if isinstance(message_id, str) and isinstance(content, str):
                    role = "user" if kind == _USER else "assistant"
                    key = (True, message_id)
                    known = latest.get(key)
                    turn = known[2] if known is not None else open_turn
                    files = attachments_of(event) if kind == _USER else ()
                    latest[key] = [message_id, role, turn, content, True, None, files]
                    growing.pop(key, None)
                    if kind == _ASSISTANT and open_turn is not None:
                        streaming = message_id
            elif kind == _DELTA:
                message_id, delta = event.get("messageId", streaming), event.get("delta")
                continues = open_turn is not None and open_turn == start.open_turn
                if message_id is None and continues:
                    message_id = streamed_before(str(open_turn))  # opened before this tail
                if isinstance(message_id, str) and isinstance(delta, str):
                    streaming = message_id
                    key = (True, message_id)
                    pieces = growing.get(key)
                    if pieces is None:
                        known = latest.get(key)
                        if known is not None:
                            base = known[3]
                        elif continues:
                            base = text_before(message_id)  # the answer's text read so far
                        else:
                            base = ""  # its earlier text, if any, is in this tail
                        pieces = growing[key] = [base]
                        latest[key] = [message_id, "assistant", open_turn, "", True, None]
                    pieces.append(delta)
            elif kind in (_TOOL_CALL, _TOOL_RESULT):
                _tool_text(event, kind == _TOOL_CALL, open_turn, latest)
            elif kind == _TURN_START:
                open_turn, streaming = event.get("turnId"), None
            elif kind == _TURN_END:
                if event.get("turnId") == open_turn:
                    open_turn, streaming = None, None
            elif kind in _TITLE_EVENTS:
                if isinstance(event.get("title"), str):
                    title = event["title"]
            elif kind == _LEGACY:
                _legacy_messages(event, latest)
            elif kind == _MERGE:
                child, number, ts = event.get("childSessionId"), event.get("seq"), event.get("ts")
                if isinstance(child, str) and isinstance(number, int):
                    when = float(ts) if isinstance(ts, int | float) else 0.0
                    merges.append(TailMerge(child, number, when))
    for key, pieces in growing.items():
        latest[key][3] = "".join(pieces)
    return TailRead(
        frames=frames,
        consumed=consumed,
        end=TailPosition(commit, seq, open_turn, title),
        texts=tuple(TailText(*fields) for fields in latest.values()),
        merges=tuple(merges),
    )


def _legacy_messages(event: dict[str, Any], latest: dict[tuple[bool, str], list[Any]]) -> None:
    """Imported history, named as the projection names it (per log: not shared)."""
    items = event.get("messages")
    if not isinstance(items, list):
        return
    for number, item in enumerate(items):
        role = item.get("role", "user") if isinstance(item, dict) else "user"
        content = item.get("content", "") if isinstance(item, dict) else str(item)
        if role not in ("user", "assistant") or not isinstance(content, str):
            continue
        message_id = f"legacy-{event.get('seq')}-{number}"
        latest[(False, message_id)] = [message_id, role, None, content, False, None]


def _tool_text(
    event: dict[str, Any],
    call: bool,
    turn_id: str | None,
    latest: dict[tuple[bool, str], list[Any]],
) -> None:
    """A tool call (its name and arguments) or one of its results, as a searchable text."""
    call_id = event.get("callId")
    if not isinstance(call_id, str):
        return
    if call:
        name = event.get("name")
        text = " ".join(
            part
            for part in (name if isinstance(name, str) else "", _as_text(event.get("args")))
            if part
        )
        key = f"tool/{turn_id or ''}/{call_id}"
    else:
        text = _as_text(event.get("output"))
        key = f"tool/{turn_id or ''}/{call_id}/{event.get('seq')}"
    role = "tool_call" if call else "tool_result"
    latest[(True, key)] = [call_id, role, turn_id, text, True, key]


def _as_text(value: Any) -> str:
    """A tool's arguments or output as text: a string as it is, anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return str(value)
