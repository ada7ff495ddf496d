"""Pack files: numbered objects of one stream, in zstd frames, with an index at the end.

A pack holds the objects ``first .. first + count - 1`` of one stream (see ``_stream``). Small
objects compress badly alone — a 500-byte chat message barely shrinks — so a pack puts
consecutive objects into shared zstd frames of up to :data:`FRAME_BYTES`: message *n*, the
response that quotes it and the next request's copy of it land in one frame, where zstd finds
the repeats. Reading one object decompresses one frame.

Layout (all integers little-endian)::

    frame 0, frame 1, ...                 zstd frames, each with its content checksum
    trailer                               one zstd frame: the table below
    trailer size (u32), crc32 of the trailer bytes (u32), b"ORPACK1\\n"

The trailer lists ``first``, the frames (compressed size, number of objects) and each
object's kind and length, as varints; offsets follow from the order. Every byte of a pack is
covered by a check: the frames by zstd's checksum, the trailer by the crc32, the footer by its
magic and by the sizes adding up to the file's.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import zstandard

__all__ = [
    "FRAME_BYTES",
    "KIND_RAW",
    "KIND_RECIPE",
    "KIND_RECORD",
    "Location",
    "PackError",
    "PackIndex",
    "decode_recipe",
    "decode_varint",
    "decompress_frame",
    "encode_pack",
    "encode_recipe",
    "encode_varint",
    "frame_entries",
    "parse_footer",
    "parse_trailer",
]

MAGIC = b"ORPACK1\n"
FOOTER = struct.Struct("<II8s")
FRAME_BYTES = 1 << 20
"""Uncompressed bytes per frame: large enough for zstd to find repeats, small enough that
reading one object stays cheap."""

KIND_RAW = 0
"""Bytes stored as they are (a whole body, or a segment of one)."""
KIND_RECIPE = 1
"""A body rebuilt from literal bytes and references to other objects of the stream."""
KIND_RECORD = 2
"""A flush record: the steps and spans of one run written by one flush (JSON)."""
_KINDS = (KIND_RAW, KIND_RECIPE, KIND_RECORD)


class PackError(ValueError):
    """A pack (or a recipe inside one) is not well formed; the caller names the file."""


def encode_varint(value: int, out: bytearray) -> None:
    """Append ``value`` (>= 0) as an unsigned LEB128 varint."""
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def decode_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it; PackError when truncated."""
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise PackError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def encode_recipe(parts: Iterable[bytes | int]) -> bytes:
    """Encode a recipe: literal bytes and references (object numbers of the same stream).

    References are stored as the zigzag distance from "previous reference + 1", so the long
    runs of consecutive references a growing history produces cost one byte each.
    """
    items = list(parts)
    out = bytearray()
    encode_varint(len(items), out)
    previous = -1
    for part in items:
        if isinstance(part, int):
            delta = part - (previous + 1)
            encode_varint(((delta << 1) ^ (delta >> 63)) << 1 | 1, out)
            previous = part
        else:
            encode_varint(len(part) << 1, out)
            out += part
    return bytes(out)


def decode_recipe(data: bytes) -> list[bytes | int]:
    """The parts of a recipe encoded by :func:`encode_recipe`."""
    count, pos = decode_varint(data, 0)
    parts: list[bytes | int] = []
    previous = -1
    for _ in range(count):
        tag, pos = decode_varint(data, pos)
        if tag & 1:
            zigzag = tag >> 1
            previous = previous + 1 + ((zigzag >> 1) ^ -(zigzag & 1))
            if previous < 0:
                raise PackError("recipe refers to a negative object number")
            parts.append(previous)
        else:
            end = pos + (tag >> 1)
            if end > len(data):
                raise PackError("recipe literal runs past its end")
            parts.append(data[pos:end])
            pos = end
    if pos != len(data):
        raise PackError("recipe has trailing bytes")
    return parts


def frame_entries(sizes: Sequence[int], limit: int = FRAME_BYTES) -> list[int]:
    """How many consecutive entries go into each frame, given the entries' sizes.

    A frame is closed before it would exceed ``limit``; an entry larger than ``limit`` gets
    a frame of its own. Entries never span frames.
    """
    counts: list[int] = []
    current = count = 0
    for size in sizes:
        if count and current + size > limit:
            counts.append(count)
            current = count = 0
        current += size
        count += 1
    if count:
        counts.append(count)
    return counts


def encode_pack(first: int, entries: Sequence[tuple[int, bytes]], level: int) -> bytes:
    """The bytes of a pack holding ``entries`` (kind, data) as objects ``first, first+1, …``."""
    compressor = zstandard.ZstdCompressor(level=level, write_checksum=True)
    out = bytearray()
    table = bytearray()
    counts = frame_entries([len(data) for _, data in entries])
    encode_varint(first, table)
    encode_varint(len(entries), table)
    encode_varint(len(counts), table)
    start = 0
    for count in counts:
        frame = compressor.compress(b"".join(data for _, data in entries[start : start + count]))
        out += frame
        encode_varint(len(frame), table)
        encode_varint(count, table)
        start += count
    for kind, data in entries:
        encode_varint(len(data) << 2 | kind, table)
    trailer = compressor.compress(bytes(table))
    out += trailer
    out += FOOTER.pack(len(trailer), zlib.crc32(trailer), MAGIC)
    return bytes(out)


@dataclass(frozen=True, slots=True)
class Location:
    """Where one object sits: its frame (byte range in the file) and its slice once
    decompressed."""

    frame: int
    frame_start: int
    frame_end: int
    offset: int
    length: int
    kind: int


@dataclass(frozen=True, slots=True)
class PackIndex:
    """The parsed trailer of a pack: which objects it holds and where."""

    first: int
    count: int
    frames: tuple[tuple[int, int, int], ...]
    """Per frame: start offset in the file, end offset, uncompressed size."""
    entries: tuple[tuple[int, int, int, int], ...]
    """Per object: frame number, offset in the decompressed frame, length, kind."""
    size: int
    """Size of the whole pack file in bytes."""

    @property
    def last(self) -> int:
        """The number of the last object in the pack."""
        return self.first + self.count - 1

    def locate(self, oid: int) -> Location:
        """Where object ``oid`` is; KeyError when this pack does not hold it."""
        if not self.first <= oid <= self.last:
            raise KeyError(oid)
        frame, offset, length, kind = self.entries[oid - self.first]
        start, end, _ = self.frames[frame]
        return Location(frame, start, end, offset, length, kind)


def parse_footer(tail: bytes) -> tuple[int, int]:
    """``(trailer size, trailer crc32)`` from the last :data:`FOOTER` bytes of a pack."""
    if len(tail) != FOOTER.size:
        raise PackError("file is shorter than a pack footer")
    size, crc, magic = FOOTER.unpack(tail)
    if magic != MAGIC:
        raise PackError("no pack footer (truncated or not a pack)")
    return size, crc


def parse_trailer(trailer: bytes, crc: int, file_size: int | None = None) -> PackIndex:
    """Check and decode a pack trailer; PackError when anything is inconsistent.

    ``file_size`` (when known) must match the size the trailer implies (:attr:`PackIndex.size`).
    """
    if zlib.crc32(trailer) != crc:
        raise PackError("pack trailer fails its crc32")
    try:
        table = zstandard.ZstdDecompressor().decompress(trailer)
    except zstandard.ZstdError as exc:
        raise PackError(f"pack trailer does not decompress: {exc}") from None
    first, pos = decode_varint(table, 0)
    count, pos = decode_varint(table, pos)
    nframes, pos = decode_varint(table, pos)
    frames: list[tuple[int, int, int]] = []
    per_frame: list[int] = []
    offset = 0
    for _ in range(nframes):
        size, pos = decode_varint(table, pos)
        objects, pos = decode_varint(table, pos)
        frames.append((offset, offset + size, 0))
        per_frame.append(objects)
        offset += size
    size = offset + len(trailer) + FOOTER.size
    if (file_size is not None and size != file_size) or sum(per_frame) != count:
        raise PackError("pack trailer does not match the file size")
    entries: list[tuple[int, int, int, int]] = []
    for frame, objects in enumerate(per_frame):
        within = 0
        for _ in range(objects):
            tag, pos = decode_varint(table, pos)
            kind = tag & 3
            if kind not in _KINDS:
                raise PackError(f"unknown object kind {kind}")
            entries.append((frame, within, tag >> 2, kind))
            within += tag >> 2
        start, end, _ = frames[frame]
        frames[frame] = (start, end, within)
    if pos != len(table):
        raise PackError("pack trailer has trailing bytes")
    return PackIndex(first, count, tuple(frames), tuple(entries), size)


def decompress_frame(data: bytes, expected: int) -> bytes:
    """Decompress one frame and check its size; PackError when it fails its checksum."""
    try:
        out = zstandard.ZstdDecompressor().decompress(data, max_output_size=max(expected, 1))
    except zstandard.ZstdError as exc:
        raise PackError(f"frame does not decompress: {exc}") from None
    if len(out) != expected:
        raise PackError(f"frame holds {len(out)} bytes, the trailer says {expected}")
    return out
