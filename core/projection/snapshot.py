"""A projection as plain data and back: what the projection snapshot stores (docs/storage.md).

Opening a big session should not replay every commit, so the writer keeps a
snapshot of its projection beside the log (:mod:`~branchwise.core.projection.snapshot_cache`
keeps the file and decides when it may be used). This module only turns a
:class:`~branchwise.core.projection.projection.Projection` into JSON-ready
values and back, field for field, so restoring gives exactly the state the
replay gave.

The state is split the way readers need it: the turn rules' part
(:class:`TrackerState`, small: fork targets need only it) and the rest, whose
message texts travel outside JSON as one string (decoding a JSON string of
every answer costs about as much as the replay it replaces; slicing one
decoded text does not).

Fields are read from the dataclasses themselves, and their names are part of
:func:`schema`, with the event types the projection interprets: a field
added to ``Turn``, ``Message``, ``TurnTracker`` or ``Projection``, or an event
type learnt, changes the schema, so older snapshots are ignored rather than
restored without it. A change of what an existing rule does bumps
:data:`STATE_VERSION`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from branchwise.core.conversation.settings import ConversationSettings
from branchwise.core.errors import InvalidEvent
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.projection.projection import Message, Projection
from branchwise.core.projection.turns import Turn, TurnTracker

STATE_VERSION = 1
"""Bumped when what a field means changes without its name changing."""

_TURN_FIELDS = tuple(f.name for f in fields(Turn))
_MESSAGE_FIELDS = tuple(f.name for f in fields(Message))
_TRACKER_FIELDS = tuple(
    f.name for f in fields(TurnTracker) if not f.name.startswith("_") and f.name != "turns"
)
_PROJECTION_FIELDS = tuple(
    f.name
    for f in fields(Projection)
    if not f.name.startswith("_") and f.name not in _TRACKER_FIELDS + ("turns", "messages")
)
_SETTINGS_FIELDS = tuple(f.name for f in fields(ConversationSettings))
_CONTENT = _MESSAGE_FIELDS.index("content")
_ATTACHMENTS = _MESSAGE_FIELDS.index("attachments")
_AUTHORITY = _TURN_FIELDS.index("open_authority")


def schema() -> str:
    """What a stored state holds: the version and every field name, in order.

    A snapshot of another schema is not restored (it would miss a field or
    mean another thing by one).
    """
    parts = (
        f"v{STATE_VERSION}",
        # The event types the projection interprets: a build that reads one more
        # (or one less) would not have built the same state from the same log.
        ",".join(sorted(Projection._DISPATCH)),
        ",".join(_TURN_FIELDS),
        ",".join(_MESSAGE_FIELDS),
        ",".join(_TRACKER_FIELDS),
        ",".join(_PROJECTION_FIELDS),
        ",".join(_SETTINGS_FIELDS),
    )
    return "|".join(parts)


class StateMismatch(ValueError):
    """A stored state that does not have the shape :func:`schema` promises (never restored)."""


@dataclass(frozen=True, slots=True)
class TrackerState:
    """The turn rules' part of a projection, as JSON-ready values.

    Attributes:
        turns: one row per turn (the ``Turn`` fields in order).
        rest: the other ``TurnTracker`` fields (open interactions and tool
            calls, legacy message count, last seq, commits).
    """

    turns: list[list[Any]]
    rest: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return {"turns": self.turns, "rest": self.rest}


@dataclass(frozen=True, slots=True)
class ProjectionState:
    """A whole projection as JSON-ready values (a consistent copy: later commits do not touch it).

    Attributes:
        tracker: the turn rules' part.
        messages: one row per message, its content replaced by its length.
        extra: the other ``Projection`` fields.
        text: every message's content, in order, as one string.
    """

    tracker: TrackerState
    messages: list[list[Any]]
    extra: dict[str, Any]
    text: str


def capture(projection: Projection) -> ProjectionState:
    """Copy a projection's state (cheap: rows of the fields' current values).

    Strings are immutable and every container is copied, so the result can be
    serialized on another thread while the projection goes on.
    """
    turns = [[getattr(t, name) for name in _TURN_FIELDS] for t in projection.turns]
    for row in turns:
        row[_AUTHORITY] = list(row[_AUTHORITY])
    texts: list[str] = []
    messages = []
    for message in projection.messages:
        row = [getattr(message, name) for name in _MESSAGE_FIELDS]
        texts.append(row[_CONTENT])
        row[_CONTENT] = len(row[_CONTENT])
        row[_ATTACHMENTS] = [item.to_json() for item in row[_ATTACHMENTS]]
        messages.append(row)
    rest = {name: _copy(getattr(projection, name)) for name in _TRACKER_FIELDS}
    extra = {name: _copy(getattr(projection, name)) for name in _PROJECTION_FIELDS}
    extra["settings"] = [getattr(projection.settings, name) for name in _SETTINGS_FIELDS]
    return ProjectionState(TrackerState(turns, rest), messages, extra, "".join(texts))


def _copy(value: Any) -> Any:
    """A copy of a field's JSON-like value (dicts and lists copied; the rest is immutable)."""
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(item) for item in value]
    return value


def restore_tracker(state: Mapping[str, Any], into: TurnTracker | None = None) -> TurnTracker:
    """A tracker (or ``into``, a fresh projection) holding a stored tracker state.

    Raises:
        StateMismatch: the state does not have the stored shape.
    """
    tracker = into if into is not None else TurnTracker()
    try:
        rows, rest = state["turns"], state["rest"]
        turns = []
        width = len(_TURN_FIELDS)
        for row in rows:
            if len(row) != width:
                raise StateMismatch("a turn row of another width")
            turn = Turn(*row)
            turn.open_authority = tuple(turn.open_authority)
            turns.append(turn)
        if set(rest) != set(_TRACKER_FIELDS):
            raise StateMismatch("tracker fields differ")
        for name in _TRACKER_FIELDS:
            setattr(tracker, name, rest[name])
    except (KeyError, TypeError, ValueError) as exc:
        raise StateMismatch(f"not a tracker state: {exc}") from exc
    tracker.turns = turns
    tracker._by_turn = {turn.turn_id: turn for turn in turns}
    return tracker


def restore(state: ProjectionState) -> Projection:
    """The projection a stored state describes.

    Raises:
        StateMismatch: the state does not have the stored shape (or its text
            is not as long as its messages say).
    """
    projection = Projection()
    restore_tracker(state.tracker.to_json(), projection)
    try:
        extra = dict(state.extra)
        settings = ConversationSettings(
            **dict(zip(_SETTINGS_FIELDS, extra.pop("settings"), strict=True))
        )
        if set(extra) != set(_PROJECTION_FIELDS) - {"settings"}:
            raise StateMismatch("projection fields differ")
        for name, value in extra.items():
            setattr(projection, name, value)
        projection.settings = settings
        text, at, width = state.text, 0, len(_MESSAGE_FIELDS)
        messages = []
        for stored in state.messages:
            row = list(stored)  # the stored rows stay as they are: restoring twice works
            length = row[_CONTENT]
            if len(row) != width or not isinstance(length, int) or at + length > len(text):
                raise StateMismatch("a message row of another width or beyond the text")
            row[_CONTENT] = text[at : at + length]
            row[_ATTACHMENTS] = tuple(AttachmentRef.from_json(item) for item in row[_ATTACHMENTS])
            at += length
            messages.append(Message(*row))
        if at != len(text) or len(messages) != len(state.messages):
            raise StateMismatch("message text left over")
    except (KeyError, TypeError, ValueError, InvalidEvent) as exc:
        if isinstance(exc, StateMismatch):
            raise
        raise StateMismatch(f"not a projection state: {exc}") from exc
    projection.messages = messages
    projection._by_message = {message.message_id: message for message in messages}
    return projection
