"""Split a body into segments worth deduplicating, by exact byte ranges.

LLM requests re-send a growing history: request *n* holds the messages of request *n-1* plus
one or two new ones, byte for byte. :func:`split` finds the elements of the top-level message
arrays of a JSON body (``messages``, ``input``, ``tools``, … of an object, or the elements of
a top-level array) and returns their byte ranges, so each element can be stored once and the
body rebuilt from its skeleton plus references.

Nothing is parsed into Python values and nothing is re-serialised: the ranges are positions in
the original bytes, found by a scanner that jumps between structural characters with ``re``
(strings, escapes and nesting respected). The ranges only ever *partition* the body, so the
rebuilt bytes are exactly the original whatever the input — a malformed body just splits badly
or not at all. The store still checks the sha256 of every rebuilt body.
"""

from __future__ import annotations

import re

__all__ = ["MIN_BODY", "MIN_SEGMENT", "SPLIT_KEYS", "split"]

SPLIT_KEYS = frozenset({b"messages", b"input", b"tools", b"contents", b"system", b"output"})
"""Keys of a top-level JSON object whose array elements become segments.

``messages`` (OpenAI Chat, Anthropic), ``input`` (OpenAI Responses), ``tools`` (all),
``contents`` (Gemini), ``system`` (Anthropic blocks), ``output`` (Responses results, which the
next request sends back as ``input`` items).
"""

MIN_SEGMENT = 64
"""Elements shorter than this stay in the skeleton: a reference would cost about as much."""

MIN_BODY = 512
"""Bodies shorter than this are stored whole."""

_WS = re.compile(rb"[ \t\r\n]*")
# The rest of a string after its opening quote, as an unrolled loop (no backtracking).
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_CONTAINER_STOP = re.compile(rb'["\[\]{}]')
_SCALAR = re.compile(rb"[^,\]}\s]*")


class _Malformed(Exception):
    """The scanner met something it does not understand; the body is stored whole."""


def _ws(buf: bytes, pos: int) -> int:
    match = _WS.match(buf, pos)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _string_end(buf: bytes, pos: int) -> int:
    """``pos`` is at an opening quote; the index just past the closing one."""
    match = _STRING_REST.match(buf, pos + 1)
    if match is None:
        raise _Malformed
    return match.end()


def _value_end(buf: bytes, pos: int) -> int:
    """The index just past the JSON value starting at ``pos`` (not whitespace)."""
    first = buf[pos : pos + 1]
    if first == b'"':
        return _string_end(buf, pos)
    if first in (b"{", b"["):
        depth = 0
        while True:
            match = _CONTAINER_STOP.search(buf, pos)
            if match is None:
                raise _Malformed
            pos = match.start()
            char = buf[pos]
            if char == 0x22:  # "
                pos = _string_end(buf, pos)
                continue
            depth += 1 if char in (0x5B, 0x7B) else -1  # [ { versus ] }
            pos += 1
            if depth == 0:
                return pos
    end = _SCALAR.match(buf, pos)
    if end is None or end.end() == pos:
        raise _Malformed
    return end.end()


def _elements(buf: bytes, pos: int, out: list[tuple[int, int]]) -> int:
    """``pos`` is at ``[``: append each element's range to ``out``; return the index past
    the closing ``]``."""
    pos = _ws(buf, pos + 1)
    if buf[pos : pos + 1] == b"]":
        return pos + 1
    while True:
        end = _value_end(buf, pos)
        out.append((pos, end))
        pos = _ws(buf, end)
        sep = buf[pos : pos + 1]
        if sep == b"]":
            return pos + 1
        if sep != b",":
            raise _Malformed
        pos = _ws(buf, pos + 1)


def _members(buf: bytes, pos: int, out: list[tuple[int, int]]) -> None:
    """``pos`` is at ``{``: split the arrays under :data:`SPLIT_KEYS`."""
    pos = _ws(buf, pos + 1)
    if buf[pos : pos + 1] == b"}":
        return
    while True:
        if buf[pos : pos + 1] != b'"':
            raise _Malformed
        key_end = _string_end(buf, pos)
        key = buf[pos + 1 : key_end - 1]
        pos = _ws(buf, key_end)
        if buf[pos : pos + 1] != b":":
            raise _Malformed
        pos = _ws(buf, pos + 1)
        if key in SPLIT_KEYS and buf[pos : pos + 1] == b"[":
            pos = _elements(buf, pos, out)
        else:
            pos = _value_end(buf, pos)
        pos = _ws(buf, pos)
        sep = buf[pos : pos + 1]
        if sep == b"}":
            return
        if sep != b",":
            raise _Malformed
        pos = _ws(buf, pos + 1)


def split(body: bytes) -> list[tuple[int, int]]:
    """Byte ranges ``(start, end)`` of the segments of ``body``, in order, non-overlapping.

    Empty when the body is short, not JSON, malformed, or has nothing worth splitting; the
    caller then stores it whole. Everything outside the ranges is the body's skeleton.
    """
    if len(body) < MIN_BODY:
        return []
    pos = _ws(body, 0)
    first = body[pos : pos + 1]
    found: list[tuple[int, int]] = []
    try:
        if first == b"{":
            _members(body, pos, found)
        elif first == b"[":
            _elements(body, pos, found)
    except (_Malformed, IndexError):
        return []
    return [(start, end) for start, end in found if end - start >= MIN_SEGMENT]
