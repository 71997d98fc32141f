"""A fast first look at the end of a long session, before the full read.

Opening a conversation must paint its last page quickly however long it is,
but the writer needs the whole log replayed. So a big session is shown in two
steps: this module hops over frame headers (no decoding), decodes only the
frames of the last page of turns from the end, and replays just those; the
full read then runs off the UI thread and replaces the preview.

The preview is display-only: its branch actions stay "loading" until fork
targets come from the full, committed log. Turn numbers are made absolute by
counting earlier ``turn/start`` events with a byte search, which is exact for
the compact JSON the log writes (a quote inside a string value is escaped, so
the pattern can only match a real key).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from branchwise.core.errors import BranchwiseError
from branchwise.core.frames import HEADER, HEADER_SIZE, MAGIC, Incomplete, decode_frame
from branchwise.core.projection import Projection

from .transcript_model import Row, rows_from_projection

_TURN_START = b'"type":"turn/start"'

#: Sessions whose log is smaller than this are read fully at once.
PREVIEW_THRESHOLD_BYTES = 512 * 1024


@dataclass(frozen=True, slots=True)
class Preview:
    """The last rows of a session and how many turns precede them.

    Attributes:
        rows: the last page of rows, turn numbers absolute.
        title: the title as of the last ``session/title`` seen (may be empty).
    """

    rows: list[Row]
    title: str


def read_preview(log_path: Path, turns: int) -> Preview | None:
    """The rows of the last ``turns`` turns, or ``None`` if the log is unusual.

    ``None`` (a damaged header, no turns) just means "do the full read first".
    """
    try:
        buf = log_path.read_bytes()
    except OSError:
        return None
    offsets: list[int] = []
    offset = 0
    while offset + HEADER_SIZE <= len(buf):
        magic, _version, length, _crc, _hcrc = HEADER.unpack_from(buf, offset)
        if magic != MAGIC:
            return None
        end = offset + HEADER_SIZE + length
        if end > len(buf):
            break
        offsets.append(offset)
        offset = end
    frames = []
    started = 0
    first_turn_frame = None
    for position in range(len(offsets) - 1, -1, -1):
        try:
            frame = decode_frame(buf, offsets[position])
        except (Incomplete, BranchwiseError):
            return None
        frames.append(frame)
        starts = sum(1 for event in frame.events if event.get("type") == "turn/start")
        if starts:
            started += starts
            first_turn_frame = len(frames)
            if started >= turns:
                break
    if first_turn_frame is None:
        return None
    frames = frames[:first_turn_frame]
    frames.reverse()
    earlier_turns = buf.count(_TURN_START, 0, frames[0].offset)
    projection = Projection.replay(frame.events for frame in frames)
    for turn in projection.turns:
        turn.index += earlier_turns
    rows = [row for row in rows_from_projection(projection) if not row.imported]
    return Preview(rows=rows[-turns:], title=projection.title)
