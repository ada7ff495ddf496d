"""Pack files: content-addressed objects in zstd frames, with a table of contents at the end."""

from __future__ import annotations

import hashlib
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import zstandard

__all__ = [
    "FRAME_BYTES",
    "KIND_CHUNK",
    "KIND_MANIFEST",
    "Entry",
    "PackBuilder",
    "PackError",
    "SealedPack",
    "decompress_frame",
    "entries",
    "frame_compressor",
    "parse_table",
]

MAGIC = b"ORPK3\n"
END = b"ORPK3END"
FOOTER = struct.Struct("<II8s")
ENTRY = struct.Struct("<32sBQIII")
_SLOT = struct.Struct("<32sBII")
"""An object's place in its frame while the pack is built: digest, kind, offset, size."""

FRAME_BYTES = 256 << 10
"""Uncompressed bytes per frame when packs are written: enough for zstd to find what objects
share, little enough that reading one object stays cheap."""

KIND_CHUNK = 0
"""Bytes stored as they are."""
KIND_MANIFEST = 1
"""A body assembled from literal bytes and chunks (``_objects.decode_manifest``)."""


class PackError(ValueError):
    """A pack's bytes do not have the pack layout (the message says where it breaks)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """Where an object sits in its pack."""

    digest: bytes
    kind: int
    frame_offset: int
    frame_size: int
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class SealedPack:
    """An encoded pack: its file name (sha256 hex of ``data``), bytes, and its table (the
    entries as the file holds them, uncompressed: :func:`entries`)."""

    name: str
    data: bytes
    table: bytes

    def digests(self) -> list[bytes]:
        """The digests of the objects, in the pack's order."""
        return [fields[0] for fields in ENTRY.iter_unpack(self.table)]


def frame_compressor(level: int) -> zstandard.ZstdCompressor:
    """A compressor for a pack's frames at zstd ``level``: every frame carries its content
    checksum, which readers check. Not thread-safe: one per writer, reused for its packs."""
    return zstandard.ZstdCompressor(level=level, write_checksum=True)


class PackBuilder:
    """A pack being filled. Each object's bytes are appended as it is added, manifests to
    manifests and chunks to chunks, and its place is written down as a slot; nothing else is
    kept per object. :meth:`seal` lays the objects out, manifests first (like compresses
    with like), each kind in the order added, cuts them into frames of ``frame_bytes``,
    compresses the frames and writes the table. Objects are not checked for repeats: add
    each once."""

    def __init__(self, frame_bytes: int = FRAME_BYTES) -> None:
        self._frame_bytes = frame_bytes
        self._content = {KIND_MANIFEST: bytearray(), KIND_CHUNK: bytearray()}
        self._slots = {KIND_MANIFEST: bytearray(), KIND_CHUNK: bytearray()}

    @property
    def count(self) -> int:
        """Objects added."""
        return (len(self._slots[KIND_MANIFEST]) + len(self._slots[KIND_CHUNK])) // _SLOT.size

    @property
    def raw_bytes(self) -> int:
        """Bytes of the objects added."""
        return len(self._content[KIND_MANIFEST]) + len(self._content[KIND_CHUNK])

    def add(self, digest: bytes, kind: int, data: bytes | memoryview) -> None:
        """Add an object (its sha256, :data:`KIND_CHUNK` or :data:`KIND_MANIFEST`, its
        stored bytes)."""
        content = self._content[kind]
        self._slots[kind] += _SLOT.pack(digest, kind, len(content), len(data))
        content += data

    def seal(self, compressor: zstandard.ZstdCompressor) -> SealedPack:
        """The pack of everything added, compressed with ``compressor``
        (:func:`frame_compressor`)."""
        manifests, chunks = self._content[KIND_MANIFEST], self._content[KIND_CHUNK]
        kinds = ((KIND_MANIFEST, 0), (KIND_CHUNK, len(manifests)))
        # A frame starts where the next object would take it past ``frame_bytes``.
        starts = [0]
        for kind, base in kinds:
            for _, _, offset, size in _SLOT.iter_unpack(self._slots[kind]):
                at = base + offset
                if at > starts[-1] and at + size - starts[-1] > self._frame_bytes:
                    starts.append(at)
        ends = [*starts[1:], len(manifests) + len(chunks)]
        contents = [
            _span(manifests, chunks, start, end) for start, end in zip(starts, ends, strict=True)
        ]
        # Frames are independent: they compress on every CPU at once (outside the GIL).
        if len(contents) > 1:
            packed_all = compressor.multi_compress_to_buffer(list[Any](contents), threads=-1)
            compressed = [packed_all[n].tobytes() for n in range(len(contents))]
        else:
            compressed = [compressor.compress(c) for c in contents]
        at_file = [len(MAGIC)]
        for packed in compressed:
            at_file.append(at_file[-1] + len(packed))
        table = bytearray()
        frame = 0
        for kind, base in kinds:
            for digest, _, offset, size in _SLOT.iter_unpack(self._slots[kind]):
                at = base + offset
                while frame + 1 < len(starts) and at >= starts[frame + 1]:
                    frame += 1
                table += ENTRY.pack(
                    digest, kind, at_file[frame], len(compressed[frame]), at - starts[frame], size
                )
        packed_table = compressor.compress(table)
        footer = FOOTER.pack(len(packed_table), zlib.crc32(packed_table), END)
        data = b"".join([MAGIC, *compressed, packed_table, footer])
        name = hashlib.sha256(data).hexdigest()
        return SealedPack(name, data, bytes(table))


def _span(first: bytearray, second: bytearray, start: int, end: int) -> bytes | memoryview:
    """Bytes ``start:end`` of ``first`` followed by ``second``, without copying them unless
    they straddle the two."""
    base = len(first)
    if end <= base:
        return memoryview(first)[start:end]
    if start >= base:
        return memoryview(second)[start - base : end - base]
    return bytes(first[start:]) + bytes(second[: end - base])


def parse_table(tail: bytes, file_size: int) -> bytes:
    """The table of a pack (its entries as the file lists them, uncompressed: see
    :func:`entries`), from its last bytes (``tail``: at least the table and footer; the whole
    file is fine). PackError when they are not a valid table."""
    if file_size < len(MAGIC) + FOOTER.size or len(tail) < FOOTER.size:
        raise PackError("too short to be a pack")
    table_size, crc, end = FOOTER.unpack(tail[-FOOTER.size :])
    if end != END:
        raise PackError("no pack footer at the end")
    start = len(tail) - FOOTER.size - table_size
    if table_size > file_size - len(MAGIC) - FOOTER.size or start < 0:
        raise PackError("table size out of range")
    packed = tail[start : len(tail) - FOOTER.size]
    if zlib.crc32(packed) != crc:
        raise PackError("table checksum mismatch")
    try:
        table = zstandard.ZstdDecompressor().decompress(packed)
    except zstandard.ZstdError as exc:
        raise PackError(f"table cannot be decompressed: {exc}") from None
    if len(table) % ENTRY.size:
        raise PackError("table has a partial entry")
    limit = file_size - FOOTER.size - table_size
    for _, _, frame_offset, frame_size, _, _ in ENTRY.iter_unpack(table):
        if frame_offset < len(MAGIC) or frame_offset + frame_size > limit:
            raise PackError("an entry points outside the frames")
    return table


def entries(table: bytes) -> list[Entry]:
    """The entries of a pack's table, in the pack's order."""
    return [Entry(*fields) for fields in ENTRY.iter_unpack(table)]


def decompress_frame(data: bytes) -> bytes:
    """The content of one frame; PackError when it is damaged."""
    try:
        return zstandard.ZstdDecompressor().decompress(data)
    except zstandard.ZstdError as exc:
        raise PackError(f"frame cannot be decompressed: {exc}") from None
