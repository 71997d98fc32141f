"""A lean incremental decoder for ``text/event-stream`` bodies.

Model servers stream thousands of tiny events per reply, so the decoder works
on raw bytes (no text decoding; orjson parses the payload bytes directly) and
does as little as possible per line. It follows the SSE rules that matter for
OpenAI-compatible servers: ``data:`` lines accumulate until a blank line
dispatches the event, ``event:`` names it, comments (``:``) and unknown fields
are ignored. Lines end in ``\\n`` or ``\\r\\n``; a bare ``\\r`` line ending (no
model server sends one) is not recognised.
"""

from __future__ import annotations

from typing import NamedTuple

MAX_LINE_BYTES = 8 * 1024 * 1024
"""A line longer than this is not a sane event; refusing bounds the memory a
misbehaving server can make us hold."""


class SSEProtocolError(ValueError):
    """The body cannot be an event stream (today: a line over :data:`MAX_LINE_BYTES`)."""


class ServerSentEvent(NamedTuple):
    """One dispatched event: its name (``"message"`` by default) and data bytes."""

    event: str
    data: bytes


class SSEDecoder:
    """Feed body bytes in, get whole events out, in order."""

    __slots__ = ("_tail", "_data", "_event")

    def __init__(self) -> None:
        self._tail = b""
        self._data: list[bytes] = []
        self._event = "message"

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode ``chunk``; return the events it completes (possibly none)."""
        if self._tail:
            chunk = self._tail + chunk
        lines = chunk.split(b"\n")
        tail = lines.pop()
        if len(tail) > MAX_LINE_BYTES:
            raise SSEProtocolError(f"an event-stream line is longer than {MAX_LINE_BYTES} bytes")
        self._tail = tail
        events: list[ServerSentEvent] = []
        data = self._data
        for line in lines:
            if line[-1:] == b"\r":
                line = line[:-1]
            if not line:
                if data:
                    events.append(self._dispatch())
                    data = self._data
                continue
            if line[:5] == b"data:":
                value = line[5:]
                data.append(value[1:] if value[:1] == b" " else value)
            elif line[:6] == b"event:":
                self._event = line[6:].strip().decode("utf-8", "replace") or "message"
            # Comments (":…"), "id:", "retry:" and unknown fields carry nothing we use.
        return events

    def close(self) -> tuple[list[ServerSentEvent], bytes]:
        """End of body: flush what is pending.

        Returns the events completed by the end of the body (a last event whose
        blank line never came is still delivered, leniently) and the
        unterminated tail line, which the caller judges: an unterminated line
        usually means the connection was cut mid-event.
        """
        tail, self._tail = self._tail, b""
        events = self.feed(b"\n\n") if self._data else []
        return events, tail

    def _dispatch(self) -> ServerSentEvent:
        data = self._data
        payload = data[0] if len(data) == 1 else b"\n".join(data)
        event = ServerSentEvent(self._event, payload)
        self._data = []
        self._event = "message"
        return event
