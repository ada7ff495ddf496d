"""Pack files: content-addressed objects in zstd frames, with a table of contents at the end.

An object is addressed by the sha256 of its *content*: a chunk's content is its bytes; a
manifest's content is the body it assembles (see ``_objects``). Small objects compress badly
alone, so a pack puts many objects into shared zstd frames; reading one object decompresses
one frame. Frames are independent: a damaged byte costs the objects of one frame, not the
pack.

Layout (integers little-endian)::

    b"ORPK3\\n"                            magic
    frame 0, frame 1, ...                 zstd frames, each with its content checksum
    table                                 one zstd frame: the entries below
    table size (u32), crc32 of the table (u32), b"ORPK3END"

The table lists, per object: its digest (32 bytes), kind (u8), the offset (u64) and size
(u32) of its frame in the file, and its offset (u32) and size (u32) in the frame's content.

A pack is named by the sha256 of its whole file, so ``verify`` checks every byte with one
hash and two writers of the same objects write the same file.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import zstandard

__all__ = [
    "FRAME_BYTES",
    "KIND_CHUNK",
    "KIND_MANIFEST",
    "Entry",
    "NewObject",
    "PackError",
    "SealedPack",
    "decompress_frame",
    "encode_pack",
    "parse_table",
]

MAGIC = b"ORPK3\n"
END = b"ORPK3END"
FOOTER = struct.Struct("<II8s")
ENTRY = struct.Struct("<32sBQIII")

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
class NewObject:
    """An object to pack: its digest, kind and stored bytes."""

    digest: bytes
    kind: int
    data: bytes


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
    """An encoded pack: its file name (sha256 hex of ``data``), bytes and entries."""

    name: str
    data: bytes
    entries: list[Entry]
    raw_bytes: int


def _frames(objects: Sequence[NewObject], frame_bytes: int) -> list[list[NewObject]]:
    """Objects grouped into frames: manifests together, then chunks (like compresses with
    like), each kind in the order given."""
    ordered = [o for o in objects if o.kind == KIND_MANIFEST]
    ordered += [o for o in objects if o.kind != KIND_MANIFEST]
    frames: list[list[NewObject]] = [[]]
    size = 0
    for obj in ordered:
        if frames[-1] and size + len(obj.data) > frame_bytes:
            frames.append([])
            size = 0
        frames[-1].append(obj)
        size += len(obj.data)
    return [frame for frame in frames if frame]


def encode_pack(
    objects: Sequence[NewObject], level: int, frame_bytes: int = FRAME_BYTES
) -> SealedPack:
    """A pack of ``objects`` (none repeated) compressed at zstd ``level``."""
    compressor = zstandard.ZstdCompressor(level=level, write_checksum=True)
    frames = _frames(objects, frame_bytes)
    contents = [b"".join(o.data for o in frame) for frame in frames]
    # Frames are independent: they compress on every CPU at once (outside the GIL).
    if len(contents) > 1:
        packed_all = compressor.multi_compress_to_buffer(list[Any](contents), threads=-1)
        compressed = [packed_all[n].tobytes() for n in range(len(contents))]
    else:
        compressed = [compressor.compress(c) for c in contents]
    parts = [MAGIC]
    at = len(MAGIC)
    entries: list[Entry] = []
    for frame, packed in zip(frames, compressed, strict=True):
        offset = 0
        for o in frame:
            entries.append(Entry(o.digest, o.kind, at, len(packed), offset, len(o.data)))
            offset += len(o.data)
        parts.append(packed)
        at += len(packed)
    raw = sum(len(c) for c in contents)
    table = b"".join(
        ENTRY.pack(e.digest, e.kind, e.frame_offset, e.frame_size, e.offset, e.size)
        for e in entries
    )
    packed_table = compressor.compress(table)
    parts += [packed_table, FOOTER.pack(len(packed_table), zlib.crc32(packed_table), END)]
    data = b"".join(parts)
    return SealedPack(hashlib.sha256(data).hexdigest(), data, entries, raw)


def parse_table(tail: bytes, file_size: int) -> list[Entry]:
    """The entries of a pack, from its last bytes (``tail``: at least the table and footer;
    the whole file is fine). PackError when they are not a valid table."""
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
    entries = [Entry(*fields) for fields in ENTRY.iter_unpack(table)]
    for entry in entries:
        if entry.frame_offset < len(MAGIC) or entry.frame_offset + entry.frame_size > limit:
            raise PackError("an entry points outside the frames")
    return entries


def decompress_frame(data: bytes) -> bytes:
    """The content of one frame; PackError when it is damaged."""
    try:
        return zstandard.ZstdDecompressor().decompress(data)
    except zstandard.ZstdError as exc:
        raise PackError(f"frame cannot be decompressed: {exc}") from None
