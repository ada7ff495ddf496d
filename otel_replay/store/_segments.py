"""Split a JSON body into segments worth deduplicating: byte ranges that partition it."""

from __future__ import annotations

import re
from collections import OrderedDict

__all__ = ["MIN_BODY", "MIN_SEGMENT", "SPLIT_KEYS", "Previous", "Recent", "Shapes", "split"]

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

_KEYS = re.compile(rb'"(?:' + b"|".join(sorted(SPLIT_KEYS)) + rb')"[ \t\r\n]*:[ \t\r\n]*\[')
_WS = re.compile(rb"[ \t\r\n]*")
_CONTAINER_STOP = re.compile(rb'["\[\]{}]')


_SCALAR = re.compile(rb"[^,\]}\s]*")


class _Malformed(Exception):
    """The scanner met something it does not understand; the body is stored whole."""


def _ws(buf: bytes, pos: int) -> int:
    if buf[pos] > 0x20:  # the common case (compact JSON): no whitespace; IndexError at the end
        return pos
    match = _WS.match(buf, pos)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _string_end(buf: bytes, pos: int) -> int:
    """``pos`` is at an opening quote; the index just past the closing one.

    Quotes are found with ``bytes.find`` (memchr speed, where a regex walks byte by byte); a
    quote preceded by an odd number of backslashes is escaped and skipped.
    """
    start = pos + 1
    while True:
        quote = buf.find(b'"', start)
        if quote < 0:
            raise _Malformed
        if buf[quote - 1] != 0x5C:  # the common case: no backslash before it
            return quote + 1
        back = quote - 1
        while back > pos and buf[back] == 0x5C:
            back -= 1
        if (quote - 1 - back) % 2 == 0:
            return quote + 1
        start = quote + 1


def _container_end(buf: bytes, pos: int) -> tuple[int, int, int]:
    """``pos`` is at ``{`` or ``[``: the index past the matching close, and the start and end
    of the longest string inside (``(-1, -1)`` when there is none)."""
    depth = 0
    longest = (-1, -1)
    size = 0
    search = _CONTAINER_STOP.search
    while True:
        match = search(buf, pos)
        if match is None:
            raise _Malformed
        pos = match.start()
        char = buf[pos]
        if char == 0x22:  # "
            end = _string_end(buf, pos)
            if end - pos > size:
                size = end - pos
                longest = (pos, end)
            pos = end
            continue
        depth += 1 if char in (0x5B, 0x7B) else -1  # [ { versus ] }
        pos += 1
        if depth == 0:
            return pos, longest[0], longest[1]


def _value_end(buf: bytes, pos: int) -> int:
    """The index just past the JSON value starting at ``pos`` (not whitespace)."""
    first = buf[pos]
    if first == 0x22:  # "
        return _string_end(buf, pos)
    if first in (0x7B, 0x5B):  # { [
        return _container_end(buf, pos)[0]
    end = _SCALAR.match(buf, pos)
    if end is None or end.end() == pos:
        raise _Malformed
    return end.end()


SHAPES = 8
"""Prefixes a :class:`Shapes` remembers, and suffixes for each."""

SHAPE_STRING = 64
"""A container whose longest string is at least this long teaches its shape."""


class Shapes:
    """The shapes of recent elements, to find the end of a new element without walking it.

    A conversation's messages differ in their text, not in their structure: a shape is the
    bytes of an element before its longest string (through the opening quote) and after it.
    An element that starts with a known prefix, has a string there and continues with the
    same suffix ends where the suffix ends: the scanner's state at the string and after it
    depends only on those bytes, so walking the element would find the same end.
    """

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: list[tuple[bytes, list[bytes]]] = []
        """Each prefix with the suffixes seen after it, the prefix used last first."""

    def match(self, buf: bytes, pos: int) -> int | None:
        """The end of the element at ``pos`` if it has a known shape, else None."""
        items = self._items
        for at, (prefix, suffixes) in enumerate(items):
            if buf.startswith(prefix, pos):
                # Found once per prefix: messages whose role comes after their text (the
                # GenAI conventions' parts) share a prefix and differ in their suffix.
                try:
                    end = _string_end(buf, pos + len(prefix) - 1)
                except _Malformed:
                    return None
                for suffix in suffixes:
                    if buf.startswith(suffix, end):
                        if at:
                            items.insert(0, items.pop(at))
                        return end + len(suffix)
        return None

    def learn(self, buf: bytes, start: int, end: int, string: tuple[int, int]) -> None:
        """Remember the shape of the container ``buf[start:end]`` around ``string``."""
        prefix, suffix = buf[start : string[0] + 1], buf[string[1] : end]
        items = self._items
        for at, (known, suffixes) in enumerate(items):
            if known == prefix:
                if suffix not in suffixes:
                    suffixes.insert(0, suffix)
                    del suffixes[SHAPES:]
                items.insert(0, items.pop(at))
                return
        items.insert(0, (prefix, [suffix]))
        del items[SHAPES:]


def _element_end(buf: bytes, pos: int, shapes: Shapes | None) -> int:
    """The index just past the array element at ``pos``, learning or using its shape."""
    if shapes is None or buf[pos] not in (0x7B, 0x5B):
        return _value_end(buf, pos)
    end = shapes.match(buf, pos)
    if end is not None:
        return end
    end, string_start, string_end = _container_end(buf, pos)
    if string_end - string_start >= SHAPE_STRING:
        shapes.learn(buf, pos, end, (string_start, string_end))
    return end


_Found = list[tuple[int, int, bytes | None]]
"""Ranges ``(start, end, digest)``: the digest (sha256) when the element is a remembered
segment, else None."""


RECENT_HEAD = 64
"""Bytes at the start of a segment by which :class:`Recent` finds it again."""

RECENT_ENTRIES = 1 << 16
"""Segments :class:`Recent` keeps at most."""


class Recent:
    """Segments seen lately, found again by their first bytes.

    A conversation's next request re-sends the elements of the previous one byte for byte:
    an element that starts with the exact bytes of a remembered segment is that segment
    (a JSON value that opens with ``{``, ``[`` or ``"`` ends where its bytes end), so the
    scanner jumps over it instead of walking its strings, and its digest is known without
    hashing it again. Holds at most ``limit`` bytes and :data:`RECENT_ENTRIES` segments, the
    oldest forgotten first, and the latest segment of each head (an element whose head
    another segment took is walked and hashed: found as stored by its digest all the same).
    """

    __slots__ = ("_bytes", "_heads", "_limit", "_segments")

    def __init__(self, limit: int = 8 << 20) -> None:
        self._heads: dict[bytes, bytes] = {}
        """The first bytes of each segment -> its digest."""
        # An OrderedDict: forgetting the oldest of a plain dict scans the slots its earlier
        # deletions left, which grows with the churn; popitem(last=False) does not.
        self._segments: OrderedDict[bytes, bytes] = OrderedDict()
        """Digest -> segment, oldest first."""
        self._bytes = 0
        self._limit = limit

    def find(self, buf: bytes, pos: int) -> tuple[int, bytes] | None:
        """``(end, digest)`` of the element at ``pos`` when it is a remembered segment."""
        digest = self._heads.get(buf[pos : pos + RECENT_HEAD])
        if digest is None:
            return None
        segment = self._segments[digest]
        return (pos + len(segment), digest) if buf.startswith(segment, pos) else None

    def learn(self, segment: bytes, digest: bytes) -> None:
        """Remember ``segment`` and its sha256 (a segment that opens a JSON value, which
        ends with its bytes)."""
        if segment[:1] not in (b"{", b"[", b'"') or digest in self._segments:
            return
        head = segment[:RECENT_HEAD]
        taken = self._heads.get(head)
        if taken is not None:
            self._bytes -= len(self._segments.pop(taken))
        self._heads[head] = digest
        self._segments[digest] = segment
        self._bytes += len(segment)
        while self._bytes > self._limit or len(self._segments) > RECENT_ENTRIES:
            _, gone = self._segments.popitem(last=False)
            self._bytes -= len(gone)
            del self._heads[gone[:RECENT_HEAD]]


_Known = dict[int, tuple[int, bytes]]
"""Segments known by position: start -> (end, digest)."""


class Previous:
    """The last body split in each stream (a run's requests, one span attribute of a run),
    with its segments, for the next body of the stream to reuse.

    Request *n+1* of a conversation starts with the bytes of request *n* up to the end of its
    last message. The scanner reads bytes left to right and decides an element's end from
    its bytes alone, so every segment of the previous body that ends inside the common
    prefix is a segment of the new body, at the same position, with the same digest: the
    scanner takes it without looking at it. Holds at most ``limit`` bytes of bodies.
    """

    __slots__ = ("_bodies", "_bytes", "_limit")

    def __init__(self, limit: int = 16 << 20) -> None:
        self._bodies: OrderedDict[object, tuple[bytes, list[tuple[int, int, bytes]]]] = (
            OrderedDict()
        )
        self._bytes = 0
        self._limit = limit

    def known(self, stream: object, body: bytes) -> _Known | None:
        """The segments of ``stream``'s previous body that ``body`` repeats, by position."""
        previous = self._bodies.get(stream)
        if previous is None:
            return None
        old, segments = previous
        view = memoryview(old)  # compared in place, not copied
        # The segments repeated are a leading run (a prefix repeated up to one segment's end
        # is repeated up to every earlier one's): find its length by bisection.
        low, high = 0, len(segments)
        while low < high:
            middle = (low + high) // 2
            if body.startswith(view[: segments[middle][1]]):
                low = middle + 1
            else:
                high = middle
        if not low:
            return None
        return {start: (end, digest) for start, end, digest in segments[:low]}

    def learn(self, stream: object, body: bytes, segments: list[tuple[int, int, bytes]]) -> None:
        """Remember ``body`` and its segments (with their digests) as ``stream``'s last."""
        old = self._bodies.pop(stream, None)
        if old is not None:
            self._bytes -= len(old[0])
        self._bodies[stream] = (body, segments)
        self._bytes += len(body)
        while self._bytes > self._limit and self._bodies:
            _, gone = self._bodies.popitem(last=False)
            self._bytes -= len(gone[0])


def _elements(
    buf: bytes,
    pos: int,
    out: _Found,
    shapes: Shapes | None,
    recent: Recent | None,
    known_at: _Known | None,
) -> int:
    """``pos`` is at ``[``: append each element's range to ``out``; return the index past
    the closing ``]``."""
    # Whitespace is skipped inline where compact JSON has none (a call per separator adds up).
    pos += 1
    if buf[pos] <= 0x20:
        pos = _ws(buf, pos)
    if buf[pos] == 0x5D:  # ]
        return pos + 1
    find = recent.find if recent is not None else None
    append = out.append
    while True:
        known = known_at.get(pos) if known_at is not None else None
        if known is None and find is not None:
            known = find(buf, pos)
        if known is None:
            end = _element_end(buf, pos, shapes)
            append((pos, end, None))
        else:
            end = known[0]
            append((pos, end, known[1]))
        pos = end if buf[end] > 0x20 else _ws(buf, end)
        sep = buf[pos]
        if sep == 0x5D:  # ]
            return pos + 1
        if sep != 0x2C:  # ,
            raise _Malformed
        pos += 1
        if buf[pos] <= 0x20:
            pos = _ws(buf, pos)


def _members(
    buf: bytes,
    pos: int,
    out: _Found,
    shapes: Shapes | None,
    recent: Recent | None,
    known_at: _Known | None,
) -> None:
    """``pos`` is at ``{``: split the arrays under :data:`SPLIT_KEYS`."""
    pos = _ws(buf, pos + 1)
    if buf[pos] == 0x7D:  # }
        return
    while True:
        if buf[pos] != 0x22:  # "
            raise _Malformed
        key_end = _string_end(buf, pos)
        key = buf[pos + 1 : key_end - 1]
        pos = _ws(buf, key_end)
        if buf[pos] != 0x3A:  # :
            raise _Malformed
        pos = _ws(buf, pos + 1)
        if key in SPLIT_KEYS and buf[pos] == 0x5B:
            pos = _elements(buf, pos, out, shapes, recent, known_at)
        else:
            pos = _value_end(buf, pos)
        pos = _ws(buf, pos)
        sep = buf[pos]
        if sep == 0x7D:  # }
            return
        if sep != 0x2C:  # ,
            raise _Malformed
        pos = _ws(buf, pos + 1)


def split(
    body: bytes,
    shapes: Shapes | None = None,
    recent: Recent | None = None,
    known_at: _Known | None = None,
) -> list[tuple[int, int, bytes | None]]:
    """Byte ranges ``(start, end, digest)`` of the segments of ``body``, in order,
    non-overlapping (``digest``: the sha256 of a segment ``recent`` remembers, else None).

    Empty when the body is short, not JSON, malformed, or has nothing worth splitting; the
    caller then stores it whole. Everything outside the ranges is the body's skeleton.
    ``shapes`` and ``recent`` (kept by the caller across bodies) find the ends of new and of
    repeated elements faster; ``known_at`` (:meth:`Previous.known`) names segments by position.
    """
    if len(body) < MIN_BODY:
        return []
    found: _Found = []
    try:
        pos = _ws(body, 0)
        first = body[pos : pos + 1]
        if first == b"{":
            if _KEYS.search(body, pos) is None:
                return []  # no array under a split key: nothing to walk
            _members(body, pos, found, shapes, recent, known_at)
        elif first == b"[":
            _elements(body, pos, found, shapes, recent, known_at)
    except (_Malformed, IndexError):
        return []
    return [item for item in found if item[1] - item[0] >= MIN_SEGMENT]
