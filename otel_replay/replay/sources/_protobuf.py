"""OTLP protobuf trace data decoded into the OTLP JSON shape, without a protobuf library."""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["WireError", "decode_traces", "split_messages"]

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message of the expected shape."""


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise WireError("varint runs past the end of its message")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("varint longer than 10 bytes")


def _fields(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, Any]]:
    """``(field number, wire type, value)`` for each field of ``data[start:end]``; a
    length-delimited value is its ``(start, end)`` range."""
    pos = start
    while pos < end:
        key, pos = _varint(data, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0")
        if wire == _VARINT:
            value, pos = _varint(data, pos, end)
            yield number, wire, value
        elif wire == _I64:
            if pos + 8 > end:
                raise WireError("fixed64 runs past the end of its message")
            yield number, wire, data[pos : pos + 8]
            pos += 8
        elif wire == _LEN:
            size, pos = _varint(data, pos, end)
            if pos + size > end:
                raise WireError("length-delimited field runs past the end of its message")
            yield number, wire, (pos, pos + size)
            pos += size
        elif wire == _I32:
            if pos + 4 > end:
                raise WireError("fixed32 runs past the end of its message")
            yield number, wire, data[pos : pos + 4]
            pos += 4
        else:
            raise WireError(f"unsupported wire type {wire}")


def _text(data: bytes, span: tuple[int, int]) -> str:
    try:
        return data[span[0] : span[1]].decode("utf-8")
    except UnicodeDecodeError:
        raise WireError("string field is not UTF-8") from None


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _fixed64(raw: bytes) -> int:
    return int.from_bytes(raw, "little")


def _expect(wire: int, wanted: int, what: str) -> None:
    if wire != wanted:
        raise WireError(f"{what} has wire type {wire}, expected {wanted}")


Reader = Callable[[bytes, int, int], dict[str, Any]]


def _message(data: bytes, span: tuple[int, int], read: Reader) -> dict[str, Any]:
    return read(data, span[0], span[1])


def _any_value(data: bytes, start: int, end: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, wire, value in _fields(data, start, end):
        if number == 1:
            _expect(wire, _LEN, "AnyValue.string_value")
            out = {"stringValue": _text(data, value)}
        elif number == 2:
            _expect(wire, _VARINT, "AnyValue.bool_value")
            out = {"boolValue": bool(value)}
        elif number == 3:
            _expect(wire, _VARINT, "AnyValue.int_value")
            out = {"intValue": _int64(value)}
        elif number == 4:
            _expect(wire, _I64, "AnyValue.double_value")
            out = {"doubleValue": struct.unpack("<d", value)[0]}
        elif number == 5:
            _expect(wire, _LEN, "AnyValue.array_value")
            values = [_message(data, v, _any_value) for v in _repeated(data, value, 1)]
            out = {"arrayValue": {"values": values}}
        elif number == 6:
            _expect(wire, _LEN, "AnyValue.kvlist_value")
            values = [_message(data, v, _key_value) for v in _repeated(data, value, 1)]
            out = {"kvlistValue": {"values": values}}
        elif number == 7:
            _expect(wire, _LEN, "AnyValue.bytes_value")
            out = {"bytesValue": base64.b64encode(data[value[0] : value[1]]).decode("ascii")}
    return out


def _repeated(data: bytes, span: tuple[int, int], field: int) -> list[tuple[int, int]]:
    """The ranges of the length-delimited occurrences of ``field`` in a message."""
    out = []
    for number, wire, value in _fields(data, span[0], span[1]):
        if number == field:
            _expect(wire, _LEN, f"field {field}")
            out.append(value)
    return out


def _key_value(data: bytes, start: int, end: int) -> dict[str, Any]:
    out: dict[str, Any] = {"key": "", "value": {}}
    for number, wire, value in _fields(data, start, end):
        if number == 1:
            _expect(wire, _LEN, "KeyValue.key")
            out["key"] = _text(data, value)
        elif number == 2:
            _expect(wire, _LEN, "KeyValue.value")
            out["value"] = _message(data, value, _any_value)
    return out


def _with_attributes(out: dict[str, Any], data: bytes, value: tuple[int, int]) -> None:
    out.setdefault("attributes", []).append(_message(data, value, _key_value))


def _event(data: bytes, start: int, end: int) -> dict[str, Any]:
    out: dict[str, Any] = {"attributes": []}
    for number, wire, value in _fields(data, start, end):
        if number == 1 and wire == _I64:
            out["timeUnixNano"] = _fixed64(value)
        elif number == 2 and wire == _LEN:
            out["name"] = _text(data, value)
        elif number == 3 and wire == _LEN:
            _with_attributes(out, data, value)
    return out


def _link(data: bytes, start: int, end: int) -> dict[str, Any]:
    out: dict[str, Any] = {"attributes": []}
    for number, wire, value in _fields(data, start, end):
        if number == 1 and wire == _LEN:
            out["traceId"] = data[value[0] : value[1]].hex()
        elif number == 2 and wire == _LEN:
            out["spanId"] = data[value[0] : value[1]].hex()
        elif number == 4 and wire == _LEN:
            _with_attributes(out, data, value)
    return out


def _status(data: bytes, start: int, end: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, wire, value in _fields(data, start, end):
        if number == 2 and wire == _LEN:
            out["message"] = _text(data, value)
        elif number == 3 and wire == _VARINT:
            out["code"] = value
    return out


_SPAN_IDS = {1: "traceId", 2: "spanId", 4: "parentSpanId"}
_SPAN_TIMES = {7: "startTimeUnixNano", 8: "endTimeUnixNano"}


def _span(data: bytes, start: int, end: int) -> dict[str, Any]:
    out: dict[str, Any] = {"attributes": [], "events": [], "links": []}
    for number, wire, value in _fields(data, start, end):
        if number in _SPAN_IDS:
            _expect(wire, _LEN, _SPAN_IDS[number])
            out[_SPAN_IDS[number]] = data[value[0] : value[1]].hex()
        elif number == 5:
            _expect(wire, _LEN, "Span.name")
            out["name"] = _text(data, value)
        elif number == 6:
            _expect(wire, _VARINT, "Span.kind")
            out["kind"] = value
        elif number in _SPAN_TIMES:
            _expect(wire, _I64, _SPAN_TIMES[number])
            out[_SPAN_TIMES[number]] = _fixed64(value)
        elif number == 9:
            _expect(wire, _LEN, "Span.attributes")
            _with_attributes(out, data, value)
        elif number == 11:
            _expect(wire, _LEN, "Span.events")
            out["events"].append(_message(data, value, _event))
        elif number == 13:
            _expect(wire, _LEN, "Span.links")
            out["links"].append(_message(data, value, _link))
        elif number == 15:
            _expect(wire, _LEN, "Span.status")
            out["status"] = _message(data, value, _status)
    return out


def _scope(data: bytes, start: int, end: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, wire, value in _fields(data, start, end):
        if number == 1 and wire == _LEN:
            out["name"] = _text(data, value)
        elif number == 2 and wire == _LEN:
            out["version"] = _text(data, value)
    return out


def _scope_spans(data: bytes, start: int, end: int) -> dict[str, Any]:
    out: dict[str, Any] = {"spans": []}
    for number, wire, value in _fields(data, start, end):
        if number == 1:
            _expect(wire, _LEN, "ScopeSpans.scope")
            out["scope"] = _message(data, value, _scope)
        elif number == 2:
            _expect(wire, _LEN, "ScopeSpans.spans")
            out["spans"].append(_message(data, value, _span))
    return out


def _resource(data: bytes, start: int, end: int) -> dict[str, Any]:
    out: dict[str, Any] = {"attributes": []}
    for number, wire, value in _fields(data, start, end):
        if number == 1 and wire == _LEN:
            _with_attributes(out, data, value)
    return out


def _resource_spans(data: bytes, start: int, end: int) -> dict[str, Any]:
    out: dict[str, Any] = {"scopeSpans": []}
    for number, wire, value in _fields(data, start, end):
        if number == 1:
            _expect(wire, _LEN, "ResourceSpans.resource")
            out["resource"] = _message(data, value, _resource)
        elif number == 2:
            _expect(wire, _LEN, "ResourceSpans.scope_spans")
            out["scopeSpans"].append(_message(data, value, _scope_spans))
    return out


def decode_traces(data: bytes, start: int = 0, end: int | None = None) -> dict[str, Any]:
    """One ``TracesData`` / ``ExportTraceServiceRequest`` as an OTLP JSON dict
    (``{"resourceSpans": [...]}``). Raises WireError when the bytes are not one."""
    stop = len(data) if end is None else end
    resource_spans = []
    for number, wire, value in _fields(data, start, stop):
        if number != 1 or wire != _LEN:
            raise WireError(f"top-level field {number} (wire type {wire}) is not resource_spans")
        resource_spans.append(_message(data, value, _resource_spans))
    return {"resourceSpans": resource_spans}


def split_messages(data: bytes) -> list[tuple[int, int]]:
    """The message ranges of ``data``: the whole of it when it is one trace message, else
    the parts of a varint-length-delimited sequence (as ``writeDelimitedTo`` writes).

    Raises WireError when it is neither (truncated, or not protobuf trace data).
    """
    try:
        _check_top_level(data, 0, len(data))
        return [(0, len(data))]
    except WireError as whole:
        first = whole
    parts = []
    pos = 0
    try:
        while pos < len(data):
            size, pos = _varint(data, pos, len(data))
            if pos + size > len(data):
                raise WireError(f"message of {size} bytes runs past the end of the data")
            _check_top_level(data, pos, pos + size)
            parts.append((pos, pos + size))
            pos += size
    except WireError:
        raise first from None
    return parts


def _check_top_level(data: bytes, start: int, end: int) -> None:
    """Raise WireError unless ``data[start:end]`` is a sequence of resource_spans fields."""
    if start == end:
        raise WireError("empty message")
    for number, wire, _ in _fields(data, start, end):
        if number != 1 or wire != _LEN:
            raise WireError(f"top-level field {number} (wire type {wire}) is not resource_spans")
