"""Spans as the store keeps them: JSON-ready dicts in the shape ``examples/otlp_sink.py``
decodes OTLP into. Pure functions only (the last resource's dict is memoised)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from otel_replay import attributes as A

__all__ = ["run_id_of", "span_to_dict"]

_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1

# An enum member's ``name`` is a descriptor call; a dict look-up is a few times cheaper.
_KINDS = {kind: kind.name for kind in SpanKind}
_CODES = {code: code.name for code in StatusCode}


class _Resources:
    """The last resource encoded, with its dict: a process's spans share one resource
    (immutable), so its attributes are encoded once. The pair is replaced whole, so a thread
    reading it sees one pair."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last: tuple[Resource, dict[str, Any]] | None = None

    def of(self, resource: Resource) -> dict[str, Any]:
        """The dict of ``resource``'s attributes, shared by the spans of one resource:
        callers serialise it and never change it."""
        last = self.last
        if last is not None and last[0] is resource:
            return last[1]
        out = _attributes(resource.attributes)
        self.last = (resource, out)
        return out


_RESOURCES = _Resources()


def run_id_of(span: ReadableSpan) -> str | None:
    """The ``replay.run.id`` of an SDK span, or None (it is not a recorded span)."""
    attrs = span.attributes
    # Not ``if attrs``: an SDK span's attributes count themselves in Python.
    value = attrs.get(A.REPLAY_RUN_ID) if attrs is not None else None
    return value if isinstance(value, str) and value else None


def span_to_dict(span: ReadableSpan, *, end_ns: int | None = None) -> dict[str, Any]:
    """The store's dict of an SDK span; ``end_ns`` stands in for the end of a span that never
    ended (one still open at shutdown)."""
    context = span.context
    parent = span.parent
    scope = span.instrumentation_scope
    status = span.status
    end = span.end_time
    events = _listed(span, "_events", "events")
    links = _listed(span, "_links", "links")
    return {
        "name": span.name,
        "kind": _KINDS.get(span.kind) or span.kind.name,
        "trace_id": f"{context.trace_id:032x}" if context is not None else None,
        "span_id": f"{context.span_id:016x}" if context is not None else None,
        "parent_span_id": f"{parent.span_id:016x}" if parent is not None else None,
        "start_ns": span.start_time,
        "end_ns": end if end is not None else end_ns,
        "status": {
            "code": _CODES.get(status.status_code) or status.status_code.name,
            "message": status.description or "",
        },
        "attributes": _attributes(span.attributes),
        "events": [
            {"name": e.name, "time_ns": e.timestamp, "attributes": _attributes(e.attributes)}
            for e in events
        ],
        "links": [
            {
                "trace_id": f"{link.context.trace_id:032x}",
                "span_id": f"{link.context.span_id:016x}",
                "attributes": _attributes(link.attributes),
            }
            for link in links
        ],
        "resource": _RESOURCES.of(span.resource),
        "scope": scope.name if scope is not None else None,
    }


def _listed(span: ReadableSpan, held: str, public: str) -> Sequence[Any]:
    """``span.<public>`` (its events or links), or () when the SDK's own list ``held`` is
    empty, as it mostly is: the property copies the list under its lock."""
    raw = getattr(span, held, None)
    if raw is not None and not raw:
        return ()
    return getattr(span, public)  # type: ignore[no-any-return]


def _attributes(attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    if attrs is None:  # not ``if not attrs``: an SDK span's attributes count themselves in Python
        return {}
    # An SDK span's attributes (a proxy of BoundedAttributes) copy as a dict at C speed, where
    # iterating them calls a Python method per item.
    copy = getattr(attrs, "copy", None)
    copied = copy() if copy is not None else None
    out: dict[str, Any] = copied if type(copied) is dict else dict(attrs)
    for key, value in out.items():
        kind = type(value)
        if kind is str:
            if not (value.isascii() or _encodable(value)):
                out[key] = _scrub(value)
        elif kind is int:
            if not _INT_MIN <= value <= _INT_MAX:
                out[key] = str(value)
        elif kind is not bool and kind is not float:
            out[key] = _value(value)
    return out


def _value(value: Any) -> Any:
    if isinstance(value, str):
        return value if value.isascii() or _encodable(value) else _scrub(value)
    if isinstance(value, bool | float) or value is None:
        return value
    if isinstance(value, int):
        return value if _INT_MIN <= value <= _INT_MAX else str(value)
    if isinstance(value, tuple | list):
        return [_value(item) for item in value]
    return str(value)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _scrub(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")
