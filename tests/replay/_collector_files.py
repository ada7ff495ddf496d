"""Files written as the OpenTelemetry Collector's file exporter writes them.

Matched against open-telemetry/opentelemetry-collector-contrib ``exporter/fileexporter``:

* ``file_writer.go`` (commit f434b5640b3a8513b89a4346ef88ac2044b05b75): ``format: json``
  without compression writes each export request then ``"\\n"`` (``exportMessageAsLine``);
  ``format: proto``, or any compression, writes 4 bytes of big-endian length then the
  request (``exportMessageAsBuffer``).
* ``codec.go`` (commit 2de7cd28c751af27b9a8140055169f4851f1ceaa) and ``marshaller.go``
  (a16cbac0474ca5fa126f67db4f403713fb872beb): ``compression: zstd`` compresses each
  marshalled request into one zstd frame (``EncodeAll``) before that framing.
* ``compression_writer.go`` (432a0e7093f680103eb6d9e0e1263140fb22347a), behind the
  ``exporter.file.nativeCompression`` gate (``generated_feature_gates.go``, v0.154.0): the
  file is a zstd stream; with ``rotation`` each write is one frame, without it one frame
  runs until the next flush.
* Rotation (``factory.go`` dfb8a5637b0a5975e7853ea2a372ab38819438d7, timberjack; lumberjack
  before it): the live file ``NAME.EXT`` is renamed ``NAME-2006-01-02T15-04-05.000.EXT``
  (timberjack adds ``-size`` or ``-time`` after the time) and a new live file begins.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import orjson
import zstandard
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan

from tests.replay.conftest import otlp_request, request_json

Format = Literal["json", "proto"]
Compression = Literal["none", "zstd", "native"]
Batch = Sequence[ReadableSpan] | ExportTraceServiceRequest
"""One export request: its spans, or the request itself (as an OTLP receiver got it)."""


@dataclass(frozen=True)
class Exporter:
    """One file exporter configuration: ``format``, and ``compression`` (``native``: zstd
    with the nativeCompression gate on)."""

    format: Format = "json"
    compression: Compression = "none"

    def marshal(self, spans: Batch) -> bytes:
        """One export request, as the exporter's marshaller gives it."""
        request = spans if isinstance(spans, ExportTraceServiceRequest) else otlp_request(spans)
        if self.format == "json":
            return orjson.dumps(request_json(request))
        return bytes(request.SerializeToString())

    def writes(self, spans: Batch) -> list[bytes]:
        """The writes to the file's writer for one export request, before native zstd."""
        buf = self.marshal(spans)
        if self.compression == "zstd":
            buf = zstandard.ZstdCompressor().compress(buf)
        if self.format == "json" and self.compression != "zstd":
            return [buf, b"\n"]
        return [len(buf).to_bytes(4, "big") + buf]

    def file(self, batches: Sequence[Batch]) -> bytes:
        """A whole file holding ``batches``, one export request each (native zstd: as with
        ``rotation``, one frame per write)."""
        writes = [w for batch in batches for w in self.writes(batch)]
        if self.compression != "native":
            return b"".join(writes)
        return b"".join(zstandard.ZstdCompressor().compress(w) for w in writes)

    def half_written(self, spans: Sequence[ReadableSpan]) -> bytes:
        """The start of one more export request, as the live file holds it while the
        Collector writes it: part of a line or record; with native zstd and no rotation, a
        frame the next flush has not finished (its blocks so far)."""
        if self.compression != "native":
            return self.file([spans])[:-7]
        out = io.BytesIO()
        stream = zstandard.ZstdCompressor().stream_writer(out, closefd=False)
        for write in self.writes(spans):
            stream.write(write)
        stream.flush(zstandard.FLUSH_BLOCK)
        return out.getvalue()


def backup_name(live: str, stamp: str, reason: str = "") -> str:
    """The name rotation gives the live file ``live`` at ``stamp`` (2026-11-21T09-00-00.000);
    ``reason`` is timberjack's ``size`` or ``time`` (empty: lumberjack)."""
    stem, dot, ext = live.rpartition(".")
    if not dot:
        stem, ext = live, ""
    tail = f"-{reason}" if reason else ""
    return f"{stem}-{stamp}{tail}{dot}{ext}"


def write_rotated(
    folder: Path,
    exporter: Exporter,
    files: Sequence[Sequence[Batch]],
    live: str = "traces.json",
    reason: str = "size",
) -> list[Path]:
    """``files`` (each a list of batches) written as rotation leaves them: all but the last
    as backups, oldest first, the last as the live file. Returns the paths, in that order."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [
        folder / backup_name(live, f"2026-11-21T09-0{n}-00.000", reason)
        for n in range(len(files) - 1)
    ]
    paths.append(folder / live)
    for path, batches in zip(paths, files, strict=True):
        path.write_bytes(exporter.file(batches))
    return paths


def batches(spans: Sequence[ReadableSpan], size: int) -> list[list[ReadableSpan]]:
    """``spans`` in export requests of ``size`` spans, in order."""
    return [list(spans[i : i + size]) for i in range(0, len(spans), size)]


def split(items: Sequence[list[ReadableSpan]], parts: int) -> list[list[list[ReadableSpan]]]:
    """``items`` (batches) cut into ``parts`` files, in order, none empty."""
    size = -(-len(items) // parts)
    return [list(items[i : i + size]) for i in range(0, len(items), size)]
