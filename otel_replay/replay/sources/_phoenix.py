"""Spans read from a Phoenix server's REST API, as OTLP JSON.

``GET /v1/projects/{project}/spans`` answers pages of Phoenix's own span JSON (flat,
snake_case, no resource, ISO times, the OTel span kind replaced by the OpenInference one),
``{"data": [...], "next_cursor": ...}``. Each span is turned back into an OTLP JSON span so
the loader reads it like any other source. Phoenix keeps times to the microsecond.
"""

from __future__ import annotations

import calendar
import json
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote, urlencode

import orjson

from otel_replay import attributes as A
from otel_replay.errors import SourceError
from otel_replay.replay.sources._fetch import Downloads, answer_object
from otel_replay.replay.sources._limits import Limits
from otel_replay.replay.sources._spans import Malformed, json_object, shown

__all__ = ["phoenix_spans"]

_PAGE = 1000
"""Spans asked for per page: the most Phoenix answers."""
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_ISO = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?"
    r"(Z|[+-]\d\d:?\d\d)?",
    re.IGNORECASE,
)


def phoenix_spans(
    base_url: str, project: str, named: str, limits: Limits, selector: str | None = None
) -> bytes:
    """The spans of ``project`` on the Phoenix at ``base_url`` as one OTLP JSON document.

    With ``selector`` (a run id or a trace id) only the spans that can belong to its run are
    asked for: those of that trace and those carrying that ``replay.run.id`` (and the run
    ids the trace's spans carry); a trace whose spans carry no run id is grouped with its
    neighbours in time, so then the whole project is read, as it is when nothing matches (so
    the error lists the runs it holds). Requests carry the API key in ``PHOENIX_API_KEY``
    when it is set (a Phoenix with authentication on asks for one). Raises SourceError naming
    ``named`` when the server cannot be reached, refuses access (one line naming the
    variable, never the key), has no such project, answers something that is not Phoenix's
    span JSON, or past ``limits`` (bytes over all pages, and time).
    """
    pages = _Pages(base_url, project, named, limits)
    spans = pages.spans() if selector is None else _selected(pages, selector)
    document = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": spans}]}]}
    return orjson.dumps(document)


def _selected(pages: _Pages, selector: str) -> list[dict[str, Any]]:
    wanted = selector.strip().lower()
    spans = pages.spans(trace_id=wanted) if _TRACE_ID.fullmatch(wanted) else []
    runs = {_run_id(span) for span in spans}
    if None in runs:
        return pages.spans()
    spans += pages.spans(attribute=f"{A.REPLAY_RUN_ID}:{json.dumps(selector)}")
    for run_id in sorted(r for r in runs if r is not None and r != selector):
        spans += pages.spans(attribute=f"{A.REPLAY_RUN_ID}:{json.dumps(run_id)}")
    # No such run: the whole project, so the error can list the runs it holds.
    return spans or pages.spans()


def _run_id(span: Mapping[str, Any]) -> str | None:
    value = span["attributes"].get(A.REPLAY_RUN_ID)
    return value if isinstance(value, str) and value else None


class _Pages:
    """Reads span pages from one Phoenix project within one set of limits."""

    def __init__(self, base_url: str, project: str, named: str, limits: Limits) -> None:
        self._url = f"{base_url}/v1/projects/{quote(project, safe='')}/spans"
        self._named = named
        key = _api_key(named)
        self._get = Downloads(limits, named, {"Authorization": f"Bearer {key}"} if key else None)
        self._statuses = {
            401: "the server refused the API key in PHOENIX_API_KEY"
            if key
            else "the server asks for an API key: set PHOENIX_API_KEY",
            403: "the API key in PHOENIX_API_KEY may not read spans"
            if key
            else "the server refused access: set PHOENIX_API_KEY",
            404: f"no project {project!r} on the server",
        }

    def spans(self, **query: str) -> list[dict[str, Any]]:
        """Every span the query answers, over all its pages, as OTLP JSON spans."""
        return [otlp_span(span, self._named) for span in self._phoenix_spans(query)]

    def _phoenix_spans(self, query: Mapping[str, str]) -> Iterator[Mapping[str, Any]]:
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            at = {"cursor": cursor} if cursor else {}
            page = self._page({**query, "limit": str(_PAGE), **at})
            data, cursor = page.get("data"), page.get("next_cursor")
            if not isinstance(data, list) or not isinstance(cursor, str | None):
                raise SourceError(f"{self._named}: the server's answer is not Phoenix span pages")
            for span in data:
                if not isinstance(span, Mapping):
                    raise SourceError(f"{self._named}: a span in the answer is not an object")
                yield span
            if cursor is None:
                return
            if cursor in seen or not data:
                raise SourceError(f"{self._named}: the server's pages do not end ({cursor!r})")
            seen.add(cursor)

    def _page(self, query: Mapping[str, str]) -> Mapping[str, Any]:
        body = self._get.get(f"{self._url}?{urlencode(query)}", statuses=self._statuses)
        return answer_object(body, self._named, "Phoenix span pages")


def _api_key(named: str) -> str | None:
    """The API key in ``PHOENIX_API_KEY`` (Phoenix's own variable, which its clients read),
    None when unset; SourceError, which never quotes it, when a header cannot carry it."""
    key = os.environ.get("PHOENIX_API_KEY", "").strip()
    if key and not all(c.isascii() and c.isprintable() and not c.isspace() for c in key):
        raise SourceError(
            f"{named}: PHOENIX_API_KEY holds characters an HTTP header cannot carry "
            "(spaces, line breaks, non-ASCII)"
        )
    return key or None


def otlp_span(span: Mapping[str, Any], named: str) -> dict[str, Any]:
    """Phoenix's JSON of one span as an OTLP JSON span; SourceError naming the span when a
    field that matters is missing or malformed."""
    try:
        context = span.get("context")
        if not isinstance(context, Mapping):
            raise Malformed("context is not an object")
        attributes = _flat(json_object(span.get("attributes"), "attributes"))
        kind = span.get("span_kind")
        if isinstance(kind, str) and kind not in ("", "UNKNOWN"):
            # Phoenix moved the attribute into span_kind; the span held it.
            attributes.setdefault("openinference.span.kind", kind)
        return {
            "traceId": context.get("trace_id"),
            "spanId": context.get("span_id"),
            "parentSpanId": span.get("parent_id") or "",
            "name": str(span.get("name") or ""),
            "startTimeUnixNano": _nanos(span.get("start_time"), "start_time"),
            "endTimeUnixNano": _nanos(span.get("end_time"), "end_time"),
            "status": {
                "code": str(span.get("status_code") or "UNSET"),
                "message": str(span.get("status_message") or ""),
            },
            "attributes": attributes,
            "events": [_event(event) for event in _list(span.get("events"), "events")],
        }
    except Malformed as exc:
        name = shown(span.get("name"))
        raise SourceError(f"{named}: span {name} cannot be read: {exc}") from None


def _event(event: Any) -> dict[str, Any]:
    event = json_object(event, "an event")
    return {
        "name": str(event.get("name") or ""),
        "timeUnixNano": _nanos(event.get("timestamp"), "an event's timestamp"),
        "attributes": _flat(json_object(event.get("attributes"), "an event's attributes")),
    }


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Malformed(f"{what} is not a list")
    return value


def _flat(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """``attributes`` with nested objects spread into dotted keys, as the span held them
    (Phoenix keeps them nested by their dotted keys; versions differ in what they answer).
    Iterative: a hostile answer may nest deeper than Python recurses."""
    out: dict[str, Any] = {}
    pending: list[tuple[str, Mapping[str, Any]]] = [("", attributes)]
    while pending:
        prefix, level = pending.pop()
        for key, value in level.items():
            if isinstance(value, Mapping):
                pending.append((f"{prefix}{key}.", value))
            else:
                out[f"{prefix}{key}"] = value
    return out


def _nanos(value: Any, what: str) -> str | None:
    """An ISO 8601 time (naive: UTC, as Phoenix keeps it) as Unix nanoseconds, in a string
    as the OTLP JSON mapping writes them; None when absent."""
    if value is None:
        return None
    match = _ISO.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise Malformed(f"{what} {str(value)[:40]!r} is not an ISO 8601 time")
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        seconds = calendar.timegm(
            (int(year), int(month), int(day), int(hour), int(minute), int(second), 0, 0, 0)
        )
    except (ValueError, OverflowError):
        raise Malformed(f"{what} {value!r} is not a valid time") from None
    if zone and zone.upper() != "Z":
        sign = -1 if zone[0] == "+" else 1
        digits = zone[1:].replace(":", "")
        seconds += sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    nanos = int((fraction or "").ljust(9, "0"))
    return str(seconds * 10**9 + nanos)
