"""Redaction of secrets a stream splits across its events (``text/event-stream``, NDJSON)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["redact_stream"]

# Top-level fields that say which content a stream event continues; pieces with different
# values are different texts.
_POSITION_KEYS = ("index", "output_index", "content_index", "item_id")

Path = tuple[str | int, ...]
Spans = Callable[[bytes], list[tuple[int, int]]]


@dataclass
class _Event:
    """One JSON event of the stream: its line, what precedes the JSON, and the parsed value."""

    line: int
    prefix: bytes
    suffix: bytes
    value: Any
    changed: bool = False


@dataclass
class _Piece:
    """One string of one event, in the order the stream delivered it."""

    event: _Event
    path: Path
    text: bytes
    edits: list[tuple[int, int, bytes]] = field(default_factory=list)


def redact_stream(data: bytes, spans: Spans, replacement: bytes) -> bytes:
    """``data`` with every span that ``spans`` finds in an assembled field, and that crosses
    events, removed from the events it crosses (``replacement`` in the first)."""
    lines = data.split(b"\n")
    fields: dict[tuple[Any, ...], list[_Piece]] = {}
    events: list[_Event] = []
    for number, line in enumerate(lines):
        event = _event(number, line)
        if event is None:
            continue
        events.append(event)
        position = _position(event.value)
        for path, text in _strings(event.value, ()):
            fields.setdefault((position, path), []).append(_Piece(event, path, text))
    for pieces in fields.values():
        if len(pieces) > 1:
            _edit(pieces, spans(b"".join(piece.text for piece in pieces)), replacement)
    changed = [event for event in events if event.changed]
    if not changed:
        return data
    for event in changed:
        encoded = orjson.dumps(event.value)
        lines[event.line] = event.prefix + encoded + event.suffix
    return b"\n".join(lines)


def _event(number: int, line: bytes) -> _Event | None:
    suffix = b"\r" if line.endswith(b"\r") else b""
    body = line[: len(line) - len(suffix)]
    if body.startswith(b"data:"):
        start = 6 if body.startswith(b"data: ") else 5
    elif body.startswith(b"{"):
        start = 0
    else:
        return None
    if body[start : start + 1] != b"{":
        return None
    try:
        value = orjson.loads(body[start:])
    except orjson.JSONDecodeError:
        return None
    return _Event(number, body[:start], suffix, value)


def _position(value: Any) -> tuple[Any, ...]:
    if not isinstance(value, dict):
        return ()
    return tuple(value.get(key) for key in _POSITION_KEYS if isinstance(value.get(key), (int, str)))


def _strings(value: Any, path: Path) -> Iterator[tuple[Path, bytes]]:
    if isinstance(value, str):
        yield path, value.encode("utf-8", "surrogatepass")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, (*path, index))


def _edit(pieces: list[_Piece], found: list[tuple[int, int]], replacement: bytes) -> None:
    """Apply each span that crosses pieces to the pieces it covers."""
    if not found:
        return
    starts = []
    offset = 0
    for piece in pieces:
        starts.append(offset)
        offset += len(piece.text)
    for begin, end in _merged(found):
        first = True
        for piece, start in zip(pieces, starts, strict=True):
            stop = start + len(piece.text)
            if stop <= begin or start >= end:
                continue
            if start <= begin and end <= stop:
                break  # within one piece: the event's own redaction saw it
            piece.edits.append(
                (max(begin, start) - start, min(end, stop) - start, replacement if first else b"")
            )
            first = False
    for piece in pieces:
        if piece.edits:
            _apply(piece)


def _merged(found: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for begin, end in sorted(found):
        if merged and begin <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((begin, end))
    return merged


def _apply(piece: _Piece) -> None:
    text = piece.text
    for begin, end, replacement in sorted(piece.edits, reverse=True):
        text = text[:begin] + replacement + text[end:]
    piece.edits.clear()
    _set(piece.event.value, piece.path, text.decode("utf-8", "ignore"))
    piece.event.changed = True


def _set(value: Any, path: Path, text: str) -> None:
    for key in path[:-1]:
        value = value[key]
    value[path[-1]] = text
