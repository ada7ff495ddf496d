"""Pack files: numbered objects of one stream, in zstd frames, with an index at the end.

A pack holds the objects ``first .. first + count - 1`` of one stream (see ``_stream``). Small
objects compress badly alone — a 500-byte chat message barely shrinks — so a pack puts
consecutive objects into shared zstd frames of up to :data:`FRAME_BYTES`: message *n*, the
response that quotes it and the next request's copy of it land in one frame, where zstd finds
the repeats. Reading one object decompresses one frame.

Within a frame, objects are stored grouped by kind — segments, then whole raw bodies, then
recipes, then records — each group in object order: like next to like compresses better
(the responses' common skeleton, the records' repeated keys), 7% smaller packs in
``bench/store_ratio.py`` than object order.

Layout (all integers little-endian)::

    frame 0, frame 1, ...                 zstd frames, each with its content checksum
    trailer                               one zstd frame: the table below
    trailer size (u32), crc32 of the trailer bytes (u32), b"ORPACK1\\n"

The trailer lists ``first``, the frames (compressed size, number of objects) and each
object's kind and length in object order, as varints; offsets follow from the storage order.
Every byte of a pack is covered by a check: the frames by zstd's checksum, the trailer by the
crc32, the footer by its magic and by the sizes adding up to the file's.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import zstandard

__all__ = [
    "FRAME_BYTES",
    "KIND_RAW",
    "KIND_RECIPE",
    "KIND_RECORD",
    "KIND_SEGMENT",
    "RECIPE_CHECK",
    "Location",
    "PackError",
    "PackIndex",
    "assemble_pack",
    "compress_frames",
    "decode_recipe",
    "decode_varint",
    "decompress_frame",
    "encode_pack",
    "encode_recipe",
    "encode_varint",
    "frame_entries",
    "pack_frames",
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
"""A body rebuilt from literal bytes and references to other objects of the stream, led by
the first :data:`RECIPE_CHECK` bytes of the sha256 of what it rebuilds."""
RECIPE_CHECK = 4
"""Bytes of the sha256 of its result a recipe carries: the reader checks every body it
rebuilds, even where no index holds the body's hash (an index being rebuilt, a span string)."""
KIND_RECORD = 2
"""A flush record: the steps and spans of one run written by one flush (JSON)."""
KIND_SEGMENT = 3
"""Bytes stored as they are: a segment of a body (read like :data:`KIND_RAW`)."""
_STORAGE_RANK = {KIND_SEGMENT: 0, KIND_RAW: 1, KIND_RECIPE: 2, KIND_RECORD: 3}
"""The order of kinds within a frame."""


def _storage_order(kinds: Sequence[int]) -> list[int]:
    """Positions of a frame's objects (given their kinds in object order) in storage order."""
    rank = _STORAGE_RANK
    return sorted(range(len(kinds)), key=lambda at: rank[kinds[at]])


class PackError(ValueError):
    """A pack (or a recipe inside one) is not well formed; the caller names the file."""


_contexts = threading.local()


def _compressor(level: int) -> zstandard.ZstdCompressor:
    """This thread's compressor for ``level``: a context is reused, not rebuilt per pack (its
    first use allocates the tables, ~0.7 ms at level 3)."""
    cached: dict[int, zstandard.ZstdCompressor] | None = getattr(_contexts, "compressors", None)
    if cached is None:
        cached = _contexts.compressors = {}
    compressor = cached.get(level)
    if compressor is None:
        compressor = cached[level] = zstandard.ZstdCompressor(level=level, write_checksum=True)
    return compressor


def _decompressor() -> zstandard.ZstdDecompressor:
    """This thread's decompressor."""
    decompressor: zstandard.ZstdDecompressor | None = getattr(_contexts, "decompressor", None)
    if decompressor is None:
        decompressor = _contexts.decompressor = zstandard.ZstdDecompressor()
    return decompressor


def encode_varint(value: int, out: bytearray) -> None:
    """Append ``value`` (>= 0) as an unsigned LEB128 varint."""
    if value < 0x80:
        out.append(value)
        return
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


def encode_recipe(parts: Iterable[bytes | int], digest: bytes) -> bytes:
    """Encode a recipe: literal bytes and references (object numbers of the same stream),
    led by the first :data:`RECIPE_CHECK` bytes of ``digest``, the sha256 of the result.

    References are stored as the zigzag distance from "previous reference + 1", so the long
    runs of consecutive references a growing history produces cost one byte each.
    """
    items = list(parts)
    out = bytearray(digest[:RECIPE_CHECK])
    encode_varint(len(items), out)
    previous = -1
    for part in items:
        if isinstance(part, int):
            delta = part - previous - 1
            encode_varint(((delta << 1) ^ (delta >> 63)) << 1 | 1, out)
            previous = part
        else:
            encode_varint(len(part) << 1, out)
            out += part
    return bytes(out)


def decode_recipe(data: bytes) -> tuple[bytes, list[bytes | int]]:
    """The check and the parts of a recipe encoded by :func:`encode_recipe`."""
    if len(data) < RECIPE_CHECK:
        raise PackError("recipe is shorter than its check")
    count, pos = decode_varint(data, RECIPE_CHECK)
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
    return data[:RECIPE_CHECK], parts


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
    counts, frames = pack_frames(entries)
    return assemble_pack(first, entries, counts, compress_frames(frames, level), level)


def pack_frames(entries: Sequence[tuple[int, bytes]]) -> tuple[list[int], list[bytes]]:
    """How many objects each frame of a pack of ``entries`` holds, and the frames' bytes
    before compression (objects in storage order)."""
    counts = frame_entries([len(data) for _, data in entries])
    frames = []
    start = 0
    for count in counts:
        chunk = entries[start : start + count]
        order = _storage_order([kind for kind, _ in chunk])
        frames.append(b"".join([chunk[at][1] for at in order]))
        start += count
    return counts, frames


def compress_frames(frames: Sequence[bytes], level: int) -> list[bytes]:
    """The frames compressed, each into a zstd frame with its checksum: in one call that
    releases the GIL throughout, where the zstd binding has one (its C backend)."""
    compressor = _compressor(level)
    if len(frames) > 1 and hasattr(compressor, "multi_compress_to_buffer"):
        done = compressor.multi_compress_to_buffer(list(frames), threads=1)
        return [done[at].tobytes() for at in range(len(done))]
    return [compressor.compress(frame) for frame in frames]


def assemble_pack(
    first: int,
    entries: Sequence[tuple[int, bytes]],
    counts: Sequence[int],
    compressed: Sequence[bytes],
    level: int,
) -> bytes:
    """A pack from its objects, its frame counts (:func:`pack_frames`) and compressed frames."""
    table = bytearray()
    encode_varint(first, table)
    encode_varint(len(entries), table)
    encode_varint(len(counts), table)
    for count, frame in zip(counts, compressed, strict=True):
        encode_varint(len(frame), table)
        encode_varint(count, table)
    for kind, data in entries:
        encode_varint(len(data) << 2 | kind, table)
    trailer = _compressor(level).compress(bytes(table))
    footer = FOOTER.pack(len(trailer), zlib.crc32(trailer), MAGIC)
    return b"".join([*compressed, trailer, footer])


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
        table = _decompressor().decompress(trailer)
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
        tags = []
        for _ in range(objects):
            tag, pos = decode_varint(table, pos)
            tags.append(tag)
        offsets = [0] * objects
        within = 0
        for at in _storage_order([tag & 3 for tag in tags]):
            offsets[at] = within
            within += tags[at] >> 2
        entries.extend(
            (frame, offset, tag >> 2, tag & 3) for offset, tag in zip(offsets, tags, strict=True)
        )
        start, end, _ = frames[frame]
        frames[frame] = (start, end, within)
    if pos != len(table):
        raise PackError("pack trailer has trailing bytes")
    return PackIndex(first, count, tuple(frames), tuple(entries), size)


def decompress_frame(data: bytes, expected: int) -> bytes:
    """Decompress one frame and check its size; PackError when it fails its checksum."""
    try:
        out = _decompressor().decompress(data, max_output_size=max(expected, 1))
    except zstandard.ZstdError as exc:
        raise PackError(f"frame does not decompress: {exc}") from None
    if len(out) != expected:
        raise PackError(f"frame holds {len(out)} bytes, the trailer says {expected}")
    return out
