"""Raw source bytes into OTLP trace documents: JSON lines, one JSON document, or protobuf,
sniffed from the content."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from otel_replay.errors import SourceError
from otel_replay.replay.sources._limits import Limits, gunzip
from otel_replay.replay.sources._protobuf import WireError, decode_traces, split_messages

__all__ = ["Document", "documents"]

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


def documents(data: bytes, source: str, limits: Limits) -> list[Document]:
    """The trace documents in ``data``, read from ``source`` (named in errors).

    Raises SourceError, naming the source (and the line, for JSON lines), when the data is
    empty, truncated, corrupt, not OTLP trace data, or past ``limits`` once gunzipped or in
    one line.
    """
    if data[:2] == _GZIP_MAGIC:
        data = gunzip(data, source, limits)
    body = data.removeprefix(_BOM).lstrip(_WHITESPACE)
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


def _unwrap(value: Any, where: str) -> Iterator[Document]:
    """The trace documents in one parsed JSON value (a document, a list, a wrapper)."""
    if isinstance(value, list):
        for item in value:
            yield from _unwrap(item, where)
        return
    if not isinstance(value, dict):
        raise SourceError(f"{where}: not OTLP trace data (a JSON {type(value).__name__})")
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
    else:
        raise SourceError(f"{where}: not OTLP trace data (no resourceSpans)")
