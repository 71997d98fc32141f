"""The last page of a conversation's turns, read without replaying the whole log.

A big conversation's tab shows its last page at once while the full read
runs off-thread. That page is found from the end of the log: either from a
projection snapshot's turns and one ``.idx`` record (:func:`last_page_start`),
or, without them, by hopping frame headers backwards and counting turn
starts. Both give the page's commits replayed into a :class:`Projection`
whose turn numbers are those of the whole conversation.
"""

from __future__ import annotations

from dataclasses import dataclass

from branchwise.core.errors import BranchwiseError
from branchwise.core.log.frames import Frame, decode_frame, frame_offsets
from branchwise.core.log.segments import SessionLog
from branchwise.core.log.sidecars import find_record, frame_crc
from branchwise.core.projection.events import EventType
from branchwise.core.projection.projection import Projection
from branchwise.core.projection.turns import Turn

_TURN_START = f'"type":"{EventType.TURN_START}"'.encode()
"""How a turn start looks in a frame's bytes: the events are JSON objects with compact
separators, so the turns before a page are counted without decoding their frames."""


@dataclass(frozen=True, slots=True)
class LastPage:
    """The last turns of a log, replayed.

    Attributes:
        projection: the page's frames replayed; turn numbers count the turns before it.
        earlier_turns: how many turns precede the page.
    """

    projection: Projection
    earlier_turns: int


def last_page_start(log: SessionLog, turns: list[Turn], page: int) -> tuple[int, int] | None:
    """Where the frames of the last ``page`` turns start in ``log``, and how many turns precede.

    From the turn state (a projection snapshot's) and one ``.idx`` binary
    search: the turn before the page closed at a frame whose end is where the
    page starts, and its index is the count of turns before it. ``None`` when
    they cannot say (too few turns, an open or spilling turn before the page,
    no index record, a record that does not match the bytes read): the reader
    then hops every frame header.
    """
    if len(turns) <= page:
        return None
    before, first = turns[-page - 1], turns[-page]
    boundary = before.boundary_sequence
    if boundary is None or before.closing_commit_spills or first.start_seq <= boundary:
        return None
    number = max(i for i, piece in enumerate(log.pieces) if piece.first_seq <= boundary)
    piece = log.pieces[number]
    found = find_record(piece.path, boundary)
    if found is None:
        return None
    record = found[0]
    if piece.seed is not None and record.end > piece.seed.end:
        return None
    offset, end = log.starts[number] + record.offset, log.starts[number] + record.end
    if not offset < end <= len(log.data) or frame_crc(log.data, offset) != record.frame_crc:
        return None
    try:
        frame = decode_frame(log.data, offset)
    except BranchwiseError:
        return None
    if frame.end != end or frame.events[-1].get("seq") != boundary:
        return None
    return end, before.index


def read_last_page(buf: bytes, turns: int, start: tuple[int, int] | None = None) -> LastPage | None:
    """The last ``turns`` turns of a log's bytes replayed, or ``None`` if the log is unusual.

    ``start``: where those turns' frames start and how many turns precede
    them (:func:`last_page_start`); without it, every frame header is hopped
    and the turns before the page counted. ``None`` (a damaged header, no
    turns) just means "do the full read first".
    """
    if start is not None:
        return _page_from(buf, start[0], start[1])
    try:
        offsets = frame_offsets(buf)
    except (OSError, BranchwiseError):
        return None
    frames = []
    started = 0
    first_turn_frame = None
    for position in range(len(offsets) - 1, -1, -1):
        try:
            frame = decode_frame(buf, offsets[position])  # whole, by frame_offsets
        except BranchwiseError:
            return None
        frames.append(frame)
        starts = sum(1 for event in frame.events if event.get("type") == EventType.TURN_START)
        if starts:
            started += starts
            first_turn_frame = len(frames)
            if started >= turns:
                break
    if first_turn_frame is None:
        return None
    frames = frames[:first_turn_frame]
    frames.reverse()
    return _page_of(frames, buf.count(_TURN_START, 0, frames[0].offset))


def _page_from(buf: bytes, start: int, earlier_turns: int) -> LastPage | None:
    """Every frame from ``start`` on (the last page's turns), replayed."""
    try:
        offsets = frame_offsets(memoryview(buf)[start:])
        frames = [decode_frame(buf, start + offset) for offset in offsets]
    except (OSError, BranchwiseError):
        return None
    return _page_of(frames, earlier_turns) if frames else None


def _page_of(frames: list[Frame], earlier_turns: int) -> LastPage:
    projection = Projection.replay(frame.events for frame in frames)
    for turn in projection.turns:
        turn.index += earlier_turns
    return LastPage(projection, earlier_turns)
