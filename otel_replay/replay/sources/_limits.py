"""Bounds on what a trace source may cost: bytes read, bytes after gunzip, line length and
download time."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from otel_replay import settings
from otel_replay.errors import SourceError

__all__ = ["Limits", "gunzip", "read_bounded", "read_file"]

_BLOCK = 1 << 16

MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longest line of a JSON-lines source: a line is one OTLP export request, a batch of spans
that exporters keep to a few MiB; a longer one is not a trace (a binary file, a runaway line)."""

TIMEOUT_S = 120.0
"""Longest a trace source download may take, in all: a trace API answers one trace in seconds;
a larger source is better downloaded once and given as a file."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds one load applies."""

    max_bytes: int
    max_line_bytes: int
    timeout_s: float

    @classmethod
    def from_env(cls) -> Limits:
        """The byte bound the environment sets (ConfigError naming a bad variable), and the
        line and time bounds."""
        return cls(settings.read("OTEL_REPLAY_SOURCE_MAX_BYTES"), MAX_LINE_BYTES, TIMEOUT_S)

    def too_large(self, source: str, what: str = "holds") -> SourceError:
        """The error for a source past :attr:`max_bytes`."""
        return SourceError(
            f"{source} {what} more than {self.max_bytes} bytes "
            "(OTEL_REPLAY_SOURCE_MAX_BYTES raises the bound)"
        )


def read_bounded(
    read: Callable[[int], bytes], source: str, limits: Limits, what: str = "holds"
) -> bytes:
    """Everything ``read`` (a stream's ``read`` or ``read1``) gives until it gives nothing,
    refusing more than ``limits.max_bytes`` (the error says ``source`` ``what`` more)."""
    parts: list[bytes] = []
    size = 0
    while block := read(_BLOCK):
        size += len(block)
        if size > limits.max_bytes:
            raise limits.too_large(source, what)
        parts.append(block)
    return b"".join(parts)


def read_file(path: Path, limits: Limits) -> bytes:
    """The bytes of ``path`` (a device or a pipe too), refusing more than the bound."""
    with path.open("rb") as stream:
        return read_bounded(stream.read, str(path), limits)


def gunzip(data: bytes, source: str, limits: Limits) -> bytes:
    """``data`` (one or more gzip members) decompressed, refusing output past the bound
    before it is produced: a bomb costs at most ``limits.max_bytes`` of memory."""
    out: list[bytes] = []
    size = 0
    rest = data
    while rest:
        member = zlib.decompressobj(wbits=31)
        try:
            block = member.decompress(rest, limits.max_bytes - size + 1)
            while True:
                size += len(block)
                if size > limits.max_bytes:
                    raise limits.too_large(source, "decompresses to")
                out.append(block)
                if not member.unconsumed_tail:
                    break
                block = member.decompress(member.unconsumed_tail, limits.max_bytes - size + 1)
            if not member.eof:
                size += len(tail := member.flush())
                if size > limits.max_bytes:
                    raise limits.too_large(source, "decompresses to")
                out.append(tail)
        except zlib.error as exc:
            raise SourceError(f"{source}: corrupt gzip data ({exc})") from None
        if not member.eof:
            raise SourceError(f"{source}: corrupt gzip data (truncated)")
        rest = member.unused_data.lstrip(b"\0")  # padding after the last member is allowed
    return b"".join(out)
