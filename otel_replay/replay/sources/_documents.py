"""Raw source bytes into OTLP trace documents: JSON lines, one JSON document, or protobuf,
gzip or zstd, length-prefixed as the Collector's file exporter writes them or not, sniffed
from the content."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import orjson

from otel_replay.errors import SourceError
from otel_replay.replay.sources._framing import (
    ZSTD_MAGIC,
    is_length_prefixed,
    length_prefixed,
    unzstd,
)
from otel_replay.replay.sources._limits import Limits, gunzip
from otel_replay.replay.sources._protobuf import WireError, decode_traces, split_messages

__all__ = ["Decoded", "Document", "decode", "documents"]

_GZIP_MAGIC = b"\x1f\x8b"
_JSON_STARTS = frozenset(b"{[")
_WHITESPACE = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"  # UTF-8's byte order mark: a prefix, its bytes no whitespace
_OTHER_SIGNALS = ("resourceMetrics", "resource_metrics", "resourceLogs", "resource_logs")


@dataclass(frozen=True, slots=True)
class Document:
    """One OTLP trace document and where it was found (``path:line`` or ``path``)."""

    where: str
    resource_spans: list[Any]


@dataclass(frozen=True, slots=True)
class Decoded:
    """The trace documents read, ``cut``: the half-written end a growing file's read left
    out, said in one line (None: nothing was left out), and ``size``: the bytes of OTLP
    data they were read from, once decompressed."""

    documents: list[Document]
    cut: str | None
    size: int


def documents(data: bytes, source: str, limits: Limits) -> list[Document]:
    """The trace documents in ``data``, read from ``source`` (named in errors).

    Raises SourceError, naming the source (and the line or record), when the data is empty,
    truncated, corrupt, not OTLP trace data, or past ``limits`` once decompressed or in
    one line.
    """
    return decode(data, source, limits).documents


def decode(data: bytes, source: str, limits: Limits, *, growing: bool = False) -> Decoded:
    """:func:`documents`, for a file that may be ``growing`` too: one the Collector is
    writing, whose half-written last line, record or zstd frame is left out (and said in
    :attr:`Decoded.cut`) rather than an error. Damage before it is an error all the same."""
    cut = None
    if data[:2] == _GZIP_MAGIC:
        data = gunzip(data, source, limits)
    elif data[:4] == ZSTD_MAGIC:
        whole = unzstd(data, source, limits, growing=growing)
        data, cut = whole.parts[0][1], whole.cut
        if not data.strip(_WHITESPACE) and cut:
            return Decoded([], cut, 0)
    if is_length_prefixed(data, growing=growing):
        records = length_prefixed(data, source, growing=growing)
        docs, size = _records(records.parts, limits)
        return Decoded(docs, records.cut or cut, size)
    try:
        return Decoded(_plain(data, source, limits), cut, len(data))
    except SourceError:
        head, newline, tail = data.rpartition(b"\n")
        if not growing or not tail.strip(_WHITESPACE):
            raise
        if not newline:
            # Its first line, begun after a rotation or a start: not yet a whole line.
            if tail.removeprefix(_BOM).lstrip(_WHITESPACE)[:1] != b"{":
                raise
            return Decoded([], f"{source}:1: left out a line being written", 0)
        try:
            complete = _plain(head + newline, source, limits)
        except SourceError:
            pass
        else:
            line = head.count(b"\n") + 2
            cut = f"{source}:{line}: left out a line being written"
            return Decoded(complete, cut, len(head) + 1)
        raise


def _plain(data: bytes, source: str, limits: Limits) -> list[Document]:
    data = data.removeprefix(_BOM)  # a text file saved by an editor that marks UTF-8
    body = data.lstrip(_WHITESPACE)
    if not body:
        raise SourceError(f"{source} is empty: no OTLP trace data")
    # Protobuf trace data starts with 0x0a (a newline), and the length after it can be "{":
    # each encoding is tried when the other fails, and the likelier one's error is reported.
    if body[0] in _JSON_STARTS:
        try:
            return _json_documents(data, source, limits)
        except SourceError:
            if data[:1] != b"\n":
                raise
            try:
                return _protobuf_documents(data, source)
            except SourceError:
                pass
            raise
    try:
        return _protobuf_documents(data, source)
    except SourceError:
        if not _is_text(body):
            raise
    return _json_documents(data, source, limits)


def _is_text(data: bytes) -> bool:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(c.isprintable() or c in "\t\r\n" for c in text)


def _protobuf_documents(data: bytes, source: str) -> list[Document]:
    try:
        parts = split_messages(data)
        return [
            Document(source if len(parts) == 1 else f"{source} message {n}", _spans_of(doc))
            for n, (start, end) in enumerate(parts, start=1)
            for doc in (decode_traces(data, start, end),)
        ]
    except WireError as exc:
        raise SourceError(
            f"{source} is neither OTLP JSON nor OTLP protobuf trace data, or it is truncated "
            f"({exc})"
        ) from None


def _records(parts: list[tuple[str, bytes]], limits: Limits) -> tuple[list[Document], int]:
    """The documents of length-prefixed records (zstd frames or not, of OTLP JSON or
    protobuf) and the bytes they hold once decompressed, which count against ``limits`` all
    together."""
    out: list[Document] = []
    size = 0
    for where, framed in parts:
        record = framed
        if framed[:4] == ZSTD_MAGIC:
            bound = replace(limits, max_bytes=limits.max_bytes - size)
            record = unzstd(framed, where, bound).parts[0][1]
        size += len(record)
        if record[:1] == b"{":
            out.extend(_line(record, where))
        else:
            out.extend(_protobuf_documents(record, where))
    return out, size


def _spans_of(document: dict[str, Any]) -> list[Any]:
    spans: list[Any] = document["resourceSpans"]
    return spans


def _json_documents(data: bytes, source: str, limits: Limits) -> list[Document]:
    try:
        whole = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        lines = _lines(data, source, limits.max_line_bytes)
        first = next(lines, None)
        if first is None or not _parses(first[1]):
            if data.lstrip(_WHITESPACE)[:1] == b"<":  # a login page, a proxy's error page
                raise SourceError(
                    f"{source}: an HTML or XML document, not OTLP trace data"
                ) from None
            # Not JSON lines either: one document, damaged where the parser stopped.
            raise SourceError(
                f"{source}:{exc.lineno}: invalid or truncated JSON ({exc.msg})"
            ) from None
        return [doc for n, line in (first, *lines) for doc in _line(line, f"{source}:{n}")]
    return list(_unwrap(whole, source))


def _lines(data: bytes, source: str, max_line_bytes: int) -> Iterator[tuple[int, bytes]]:
    start = 0
    number = 0
    while start <= len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        number += 1
        if end - start > max_line_bytes:
            raise SourceError(
                f"{source}:{number}: the line is longer than {max_line_bytes} bytes "
                "(a line holds one OTLP export request)"
            )
        line = data[start:end]
        if line.strip(_WHITESPACE):
            yield number, line
        start = end + 1


def _parses(line: bytes) -> bool:
    try:
        return isinstance(orjson.loads(line), dict)
    except orjson.JSONDecodeError:
        return False


def _line(line: bytes, where: str) -> Iterator[Document]:
    try:
        parsed = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise SourceError(f"{where}: invalid or truncated JSON ({exc.msg})") from None
    return _unwrap(parsed, where)


_JSON_NAMES = {bool: "boolean", int: "number", float: "number", str: "string", list: "array"}


def _unwrap(value: Any, where: str, in_array: bool = False) -> Iterator[Document]:
    """The trace documents in one parsed JSON value (a document, a list, a wrapper)."""
    if isinstance(value, list):
        for item in value:
            yield from _unwrap(item, where, in_array=True)
        return
    if not isinstance(value, dict):
        kind = _JSON_NAMES.get(type(value), "null")
        what = f"an item of its array is a JSON {kind}" if in_array else f"a JSON {kind}"
        raise SourceError(f"{where}: not OTLP trace data ({what})")
    if "result" in value and isinstance(value["result"], dict | list):
        yield from _unwrap(value["result"], where)
        return
    if isinstance(value.get("trace"), dict):  # Tempo's /api/v2/traces answer
        if value.get("status") == "PARTIAL":
            said = str(value.get("message") or "no reason given")[:200]
            raise SourceError(f"{where}: the server answered only part of the trace ({said})")
        yield from _unwrap(value["trace"], where)
        return
    # Tempo's trace is {"batches": [ResourceSpans…]}; newer ones say resourceSpans.
    spans = value.get("resourceSpans", value.get("resource_spans", value.get("batches")))
    if isinstance(spans, list):
        yield Document(where, spans)
    elif spans is None and any(key in value for key in _OTHER_SIGNALS):
        return
    elif "error" in value:
        raise SourceError(f"{where}: the server answered with an error: {value['error']}")
    elif spans is not None:
        raise SourceError(f"{where}: not OTLP trace data (its resourceSpans is not a list)")
    else:
        raise SourceError(f"{where}: not OTLP trace data (no resourceSpans)")
