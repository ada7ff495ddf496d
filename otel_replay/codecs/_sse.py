"""A small, strict-enough Server-Sent Events parser for recorded stream bodies."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["SseEvent", "parse_sse"]


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event: its ``event:`` name (``message`` when absent) and joined data."""

    event: str
    data: str


def parse_sse(body: bytes) -> Iterator[SseEvent]:
    """Yield the events of a complete SSE body, following the WHATWG dispatch rules.

    Lines may end in CRLF, LF or CR. Comment lines and unknown fields are skipped; an event
    with no data is not dispatched. A trailing event without its blank line is still yielded,
    because an abandoned stream ends wherever the reader stopped.
    """
    text = body.decode("utf-8", errors="replace")
    event = ""
    data: list[str] = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line:
            if data:
                yield SseEvent(event or "message", "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
    if data:
        yield SseEvent(event or "message", "\n".join(data))
