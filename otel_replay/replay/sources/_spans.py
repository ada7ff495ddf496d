"""OTLP trace documents (JSON mapping, as parsed) into the store's span dicts."""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from otel_replay.errors import SourceError

if TYPE_CHECKING:  # a stored run's spans are read without what parses trace files
    from otel_replay.replay.sources._documents import Document

__all__ = ["Malformed", "json_object", "shown", "span_dicts"]

_KINDS = ("UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
_STATUS = ("UNSET", "OK", "ERROR")
_HEX = re.compile(r"[0-9a-fA-F]*")
_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")
_SNAKE_CACHE: dict[str, str] = {}
_INT64 = (-(2**63), 2**63 - 1)
_TIME = (0, 2**63 - 1)
"""The values a time (Unix nanoseconds) may take: the store keeps signed 64-bit integers."""
_NESTING = 500
"""Brackets a string may hold before it is checked for JSON that json cannot read (nested
past the interpreter's recursion limit, about a thousand levels)."""
_READ_AS_JSON = frozenset(
    {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.definitions",
        "replay.input.messages",
        "replay.output.messages",
    }
)
"""The attributes whose JSON text every verb that shows, diffs or replays the run reads
(with :data:`_NESTING` brackets or more, checked). A recorded tool result or body is read
only by the replay, which names the step whose value it cannot read."""
_SHOWN = 40
"""Most characters of a bad value an error message quotes."""


class Malformed(ValueError):
    """A value in a span that cannot be read; becomes a SourceError naming the span."""


def span_dicts(docs: Iterable[Document]) -> list[dict[str, Any]]:
    """Every span of ``docs`` as a store span dict, in document order.

    Raises SourceError naming the document (``path:line``) and the span when a field that
    matters (ids, times, attribute values) cannot be read.
    """
    out: list[dict[str, Any]] = []
    for doc in docs:
        for resource_spans in doc.resource_spans:
            if not isinstance(resource_spans, Mapping):
                raise SourceError(f"{doc.where}: a resourceSpans entry is not an object")
            out.extend(_resource_spans(resource_spans, doc.where))
    return out


def _get(obj: Mapping[str, Any], camel: str, default: Any = None) -> Any:
    """``obj[camel]``, else ``obj[snake_case(camel)]``, else ``default``."""
    if camel in obj:
        return obj[camel]
    snake = _SNAKE_CACHE.get(camel)
    if snake is None:
        snake = _SNAKE_CACHE[camel] = _SNAKE.sub("_", camel).lower()
    return obj.get(snake, default)


def _list(obj: Mapping[str, Any], camel: str) -> list[Any]:
    value = _get(obj, camel)
    if value is None:
        return []
    if not isinstance(value, list):
        raise Malformed(f"{camel} is not a list")
    return value


def json_object(value: Any, what: str) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, ``{}`` when it is absent; Malformed otherwise."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise Malformed(f"{what} is not an object")
    return value


def shown(value: Any) -> str:
    """``repr(value)``, cut to :data:`_SHOWN` characters, for an error message."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _resource_spans(resource_spans: Mapping[str, Any], where: str) -> Iterable[dict[str, Any]]:
    try:
        resource = json_object(_get(resource_spans, "resource"), "resource")
        resource_attrs = _attributes(_get(resource, "attributes"))
        groups = [
            json_object(group, "a scopeSpans entry")
            for group in _list(resource_spans, "scopeSpans")
            + _list(resource_spans, "instrumentationLibrarySpans")
        ]
        scoped = [(_scope_name(group), _list(group, "spans")) for group in groups]
    except Malformed as exc:
        raise SourceError(f"{where}: unreadable resource: {exc}") from None
    for scope_name, spans in scoped:
        for span in spans:
            if not isinstance(span, Mapping):
                raise SourceError(f"{where}: a span is not an object: {shown(span)}")
            try:
                yield _span(span, resource_attrs, scope_name)
            except (Malformed, TypeError, AttributeError) as exc:
                name = shown(span.get("name"))  # a name of megabytes keeps the line short
                raise SourceError(f"{where}: span {name} cannot be read: {exc}") from None


def _scope_name(group: Mapping[str, Any]) -> Any:
    """The instrumentation scope's name of a scopeSpans entry, or None."""
    scope = _get(group, "scope") or _get(group, "instrumentationLibrary") or {}
    return _get(scope, "name") if isinstance(scope, Mapping) else None


def _span(span: Mapping[str, Any], resource: dict[str, Any], scope: Any) -> dict[str, Any]:
    status = json_object(_get(span, "status"), "status")
    return {
        "name": str(_get(span, "name", "")),
        "kind": _enum(_get(span, "kind"), _KINDS, "SPAN_KIND_"),
        "trace_id": _id(_get(span, "traceId"), 16, "traceId", required=True),
        "span_id": _id(_get(span, "spanId"), 8, "spanId", required=True),
        "parent_span_id": _id(_get(span, "parentSpanId"), 8, "parentSpanId"),
        "start_ns": _int(_get(span, "startTimeUnixNano"), "startTimeUnixNano", _TIME),
        "end_ns": _int(_get(span, "endTimeUnixNano"), "endTimeUnixNano", _TIME),
        "status": {
            "code": _enum(_get(status, "code"), _STATUS, "STATUS_CODE_"),
            "message": str(_get(status, "message") or ""),
        },
        "attributes": _attributes(_get(span, "attributes")),
        "events": [
            {
                "name": str(_get(event, "name", "")),
                "time_ns": _int(_get(event, "timeUnixNano"), "timeUnixNano", _TIME),
                "attributes": _attributes(_get(event, "attributes")),
            }
            for event in (json_object(e, "an event") for e in _list(span, "events"))
        ],
        "links": [
            {
                "trace_id": _id(_get(link, "traceId"), 16, "links.traceId"),
                "span_id": _id(_get(link, "spanId"), 8, "links.spanId"),
                "attributes": _attributes(_get(link, "attributes")),
            }
            for link in (json_object(x, "a link") for x in _list(span, "links"))
        ],
        "resource": dict(resource),
        "scope": scope if isinstance(scope, str) else None,
    }


def _id(value: Any, size: int, what: str, *, required: bool = False) -> str | None:
    """A trace or span id as lowercase hex; None when absent (or all zero, for a parent)."""
    if value is None or value == "":
        if required:
            raise Malformed(f"{what} is missing")
        return None
    if not isinstance(value, str):
        raise Malformed(f"{what} is not a string")
    if len(value) == size * 2 and _HEX.fullmatch(value):
        raw = bytes.fromhex(value)
    else:
        raw = _base64(value, what)
        if len(raw) != size:
            raise Malformed(f"{what} {value!r} is neither {size * 2} hex digits nor {size} bytes")
    if not any(raw):
        if required:
            raise Malformed(f"{what} is all zeros")
        return None
    return raw.hex()


def _base64(value: str, what: str) -> bytes:
    text = value.strip().replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise Malformed(f"{what} {value!r} is neither hex nor base64") from None


def _int(value: Any, what: str, bounds: tuple[int, int] = _INT64) -> int | None:
    """An int64/uint64 field: a number, or a decimal string (the JSON mapping's choice),
    within ``bounds`` (inclusive; int64 unless told): Malformed names one outside them."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise Malformed(f"{what} is a boolean")
    number: int | None = None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        with contextlib.suppress(ValueError):
            number = int(value.strip())
    if number is None:
        raise Malformed(f"{what} {shown(value)} is not an integer")
    low, high = bounds
    if not low <= number <= high:
        raise Malformed(f"{what} {shown(value)} is out of range ({low} to {high})")
    return number


def _enum(value: Any, names: tuple[str, ...], prefix: str) -> str:
    if value is None:
        return names[0]
    if isinstance(value, int) and not isinstance(value, bool):
        return names[value] if 0 <= value < len(names) else str(value)
    if isinstance(value, str):
        text = value.strip().upper().removeprefix(prefix)
        if text.isdigit():
            return _enum(int(text), names, prefix)
        return text
    raise Malformed(f"enum value {shown(value)} is neither a number nor a name")


def _attributes(value: Any) -> dict[str, Any]:
    """``[{key, value: AnyValue}]`` (or an already plain ``{key: value}``) as a plain dict."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        out = {str(k): _any(v) for k, v in value.items()}
    elif isinstance(value, list):
        out = {}
        for item in value:
            if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
                raise Malformed("an attribute has no key")
            out[item["key"]] = _any(item.get("value"))
    else:
        raise Malformed("attributes is neither a list nor an object")
    for key in _READ_AS_JSON.intersection(out):
        if isinstance(text := out[key], str) and _too_deep(text):
            raise Malformed(f"attribute {shown(key)}: JSON nested deeper than json reads")
    return out


def _any(value: Any) -> Any:
    """An ``AnyValue`` as a plain value; a value that is not an AnyValue object is kept."""
    if not isinstance(value, Mapping):
        return value
    if not value:
        return None
    for camel, read in _VALUE_READERS:
        found = _get(value, camel, _MISSING)
        if found is not _MISSING:
            return read(found)
    return None  # an AnyValue of a kind this reader does not know


def _double(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
        if value in special:
            return special[value]
        try:
            return float(value)
        except ValueError:
            pass
    raise Malformed(f"doubleValue {shown(value)} is not a number")


def _too_deep(text: str) -> bool:
    """Whether ``text`` is JSON nested deeper than json reads (text that is not JSON is not)."""
    if text.count("[") + text.count("{") < _NESTING or text.lstrip()[:1] not in ("[", "{"):
        return False
    try:
        json.loads(text)
    except RecursionError:
        return True
    except ValueError:  # not JSON: text like any other
        pass
    return False


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value in {"true", "false"}:
        return bool(value == "true")
    raise Malformed(f"boolValue {shown(value)} is not a boolean")


def _array(value: Any) -> list[Any]:
    values = _get(value, "values") if isinstance(value, Mapping) else None
    return [_any(v) for v in values or ()]


def _kvlist(value: Any) -> dict[str, Any]:
    values = _get(value, "values") if isinstance(value, Mapping) else None
    return _attributes(values or [])


def _intvalue(value: Any) -> int | None:
    return _int(value, "intValue")


_MISSING = object()
_VALUE_READERS = (
    ("stringValue", str),
    ("intValue", _intvalue),
    ("boolValue", _bool),
    ("doubleValue", _double),
    ("arrayValue", _array),
    ("kvlistValue", _kvlist),
    ("bytesValue", str),
)
