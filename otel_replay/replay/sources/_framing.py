"""The Collector file exporter's framings, undone: zstd and 4-byte length-prefixed records.

The exporter (opentelemetry-collector-contrib ``exporter/fileexporter``) writes JSON lines
when ``format: json`` has no compression. Otherwise each record is 4 bytes (big-endian
length) then the record; with ``compression: zstd`` the record is one zstd frame of the
JSON or protobuf export request. Behind the ``exporter.file.nativeCompression`` gate the
whole file is a zstd stream instead (one frame per write when rotating, a frame per flush
otherwise), holding JSON lines or length-prefixed protobuf.

A file the Collector is writing may end in half a record (a frame, a line): ``growing``
reads leave it out and say so in :attr:`Unframed.cut`.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import zstandard

from otel_replay.errors import SourceError
from otel_replay.replay.sources._limits import Limits, read_bounded

__all__ = ["ZSTD_MAGIC", "Unframed", "is_length_prefixed", "length_prefixed", "unzstd"]

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_SKIPPABLE = range(0x184D2A50, 0x184D2A60)  # skippable frames' magic numbers
_RECORD_STARTS = (ZSTD_MAGIC, b"{", b"\n")  # a zstd frame, OTLP JSON, protobuf field 1
_NOT_A_LENGTH = frozenset(b"{[ \t\r\n")  # a JSON document, or protobuf field 1, starts so


@dataclass(frozen=True, slots=True)
class Unframed:
    """What a framing held: the records (each ``(where, bytes)``, or the one plain body),
    and ``cut``, the half-written end a growing file's read left out (None: nothing)."""

    parts: list[tuple[str, bytes]]
    cut: str | None = None


def unzstd(data: bytes, source: str, limits: Limits, *, growing: bool = False) -> Unframed:
    """The content of ``data``, one or more zstd frames, as one plain part.

    A last frame cut short is left out (``cut`` says so) when ``growing``, else an error.
    Raises SourceError naming ``source`` when the data is corrupt, truncated, or decompresses
    past ``limits`` (refused before it is produced).
    """
    end, complete = _frames_end(data)
    cut = None
    if not complete:
        if not growing:
            raise SourceError(f"{source}: truncated zstd data (the last frame is cut short)")
        cut = f"{source}: left out a zstd frame being written ({len(data) - end} bytes)"
    reader = zstandard.ZstdDecompressor().stream_reader(
        io.BytesIO(data[:end]), read_across_frames=True
    )
    try:
        plain = read_bounded(reader.read, source, limits, "decompresses to")
    except zstandard.ZstdError as exc:
        raise SourceError(f"{source}: corrupt zstd data ({exc})") from None
    return Unframed([(source, plain)], cut)


def _frames_end(data: bytes) -> tuple[int, bool]:
    """Where the last whole frame of ``data`` ends, and whether the data ends there.

    Walks frame and block headers (RFC 8878) without decompressing: a frame cut short is
    told from a whole one, which the decompressor does not tell. Bytes that are not a frame
    count as a whole frame here; decompressing them reports the corruption.
    """
    pos = 0
    while pos < len(data):
        end = _frame_end(data, pos)
        if end is None:
            return pos, False
        pos = end
    return pos, True


def _frame_end(data: bytes, pos: int) -> int | None:
    """The end of the frame at ``pos``, None when it runs past the data."""
    if len(data) - pos < 8:
        return None
    magic = int.from_bytes(data[pos : pos + 4], "little")
    if magic in _SKIPPABLE:
        end = pos + 8 + int.from_bytes(data[pos + 4 : pos + 8], "little")
        return end if end <= len(data) else None
    if data[pos : pos + 4] != ZSTD_MAGIC:
        return len(data)
    descriptor = data[pos + 4]
    single_segment = descriptor >> 5 & 1
    content_size_bytes = (single_segment, 2, 4, 8)[descriptor >> 6]
    header = 1 + (not single_segment) + (0, 1, 2, 4)[descriptor & 3] + content_size_bytes
    at = pos + 4 + header
    while True:
        if at + 3 > len(data):
            return None
        block = int.from_bytes(data[at : at + 3], "little")
        size = 1 if (block >> 1) & 3 == 1 else block >> 3  # an RLE block holds one byte
        at += 3 + size
        if block & 1:  # the last block
            break
    at += 4 if descriptor >> 2 & 1 else 0  # the content checksum
    return at if at <= len(data) else None


def is_length_prefixed(data: bytes, *, growing: bool = False) -> bool:
    """True when ``data`` starts like the exporter's length-prefixed records: 4 bytes of
    length, then a zstd frame, OTLP JSON or a protobuf trace message, all of it there (but
    in a ``growing`` file: the first record may be being written). A varint-delimited
    sequence of messages is not taken for one."""
    size = int.from_bytes(data[:4], "big")
    return (
        len(data) > 4
        and data[0] not in _NOT_A_LENGTH
        and size > 0
        and data[4:].startswith(_RECORD_STARTS)
        and (growing or 4 + size <= len(data))
    )


def length_prefixed(data: bytes, source: str, *, growing: bool = False) -> Unframed:
    """The records of ``data`` (each 4 bytes of big-endian length, then the record), each
    named ``source record N``. A last record cut short is left out (``cut``) when
    ``growing``; else SourceError naming ``source`` and the record."""
    parts: list[tuple[str, bytes]] = []
    pos = 0
    while pos < len(data):
        number = len(parts) + 1
        size = int.from_bytes(data[pos : pos + 4], "big")
        end = pos + 4 + size
        if pos + 4 > len(data) or end > len(data):
            if growing:
                return Unframed(parts, f"{source}: left out record {number}, being written")
            raise SourceError(
                f"{source}: record {number} is truncated ({len(data) - pos} bytes left, "
                f"{size + 4} announced)"
            )
        parts.append((f"{source} record {number}", data[pos + 4 : end]))
        pos = end
    return Unframed(parts)
