"""Finding a run's traces on Jaeger and Tempo by its run id, through each one's search.

A run recorded without ``otel_replay.run()`` is a trace per model call, all carrying the same
``replay.run.id``. Jaeger v2's query API v3 finds them with ``GET /api/v3/traces`` (an
attribute filter; a service and a time range are required, so every service is searched) and
answers the traces themselves; Tempo's TraceQL search, ``GET /api/search?q=…``, answers their
ids, each then read by the caller. Both search a week (:class:`Window`), and at most
:data:`MAX_TRACES` traces make a run.
"""

from __future__ import annotations

import calendar
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from otel_replay import attributes as A
from otel_replay.errors import SourceError
from otel_replay.replay.sources._documents import documents
from otel_replay.replay.sources._fetch import Downloads, answer_object
from otel_replay.replay.sources._spans import span_dicts

__all__ = ["MAX_TRACES", "Window", "jaeger_traces", "run_ids", "tempo_trace_ids"]

MAX_TRACES = 100
"""Most traces one run may have on a backend: each is read, and all count together against
the source bounds."""
MAX_SERVICES = 100
"""Most services searched on a Jaeger: its search takes one service at a time."""
_WEEK_S = 7 * 24 * 3600
"""How long a span of time is searched: the longest Tempo searches unless told otherwise
(its ``max_search_duration``, 168 h)."""
_MARGIN_S = 3600
"""Room for the recording host's clock to differ from the server's."""
_GENERATED = re.compile(r"r_(\d{8}T\d{6})_")
_HEX_ID = re.compile(r"[0-9a-fA-F]{1,32}")


@dataclass(frozen=True, slots=True)
class Window:
    """The span of time a run's traces are searched in, Unix seconds."""

    start: int
    end: int

    @classmethod
    def of(cls, run_id: str, now: float | None = None) -> Window:
        """The week from an hour before the start a generated run id carries
        (``r_20261121T090000_…``, UTC); for any other run id, the week to an hour after
        ``now``."""
        generated = _GENERATED.match(run_id)
        if generated:
            try:
                started = calendar.timegm(time.strptime(generated[1], "%Y%m%dT%H%M%S"))
            except ValueError:  # r_20261340T…: no time, so no generated id
                pass
            else:
                return cls(started - _MARGIN_S, started - _MARGIN_S + _WEEK_S)
        end = int(time.time() if now is None else now) + _MARGIN_S
        return cls(end - _WEEK_S, end)

    def __str__(self) -> str:
        return f"from {_iso(self.start)} to {_iso(self.end)}"


def _iso(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def jaeger_traces(get: Downloads, base_url: str, run_id: str, window: Window) -> list[bytes]:
    """Jaeger's answers (OTLP JSON) holding the traces whose spans carry ``run_id``, one
    answer per service that has some. Raises SourceError naming the source when none does,
    when more than :data:`MAX_TRACES` do, or when the server answered traces without the
    run id (it ignored the filter: Jaeger before v2.19 did over HTTP)."""
    listed = answer_object(get.get(f"{base_url}/api/v3/services"), get.named).get("services", [])
    if not isinstance(listed, list) or not all(isinstance(s, str) for s in listed):
        raise SourceError(f"{get.named}: the server's list of services is not a list of names")
    if len(listed) > MAX_SERVICES:
        raise SourceError(
            f"{get.named}: more than {MAX_SERVICES} services to search for run {run_id!r}; "
            "give the run's trace ids (…/TRACE_ID,TRACE_ID)"
        )
    answers: list[bytes] = []
    found: set[str] = set()
    for service in listed:
        query = {
            "query.service_name": service,
            "query.start_time_min": _iso(window.start),
            "query.start_time_max": _iso(window.end),
            "query.num_traces": str(MAX_TRACES + 1),
            "query.attributes": json.dumps({A.REPLAY_RUN_ID: run_id}),
        }
        answer = get.get(f"{base_url}/api/v3/traces?{urlencode(query)}", absent=(404,))
        if answer is None:  # Jaeger's "No traces found"
            continue
        traces, carrying = _traces_carrying(answer, run_id, get)
        if traces - carrying:
            raise SourceError(
                f"{get.named}: the server's search answered traces without run {run_id!r} "
                "(Jaeger before v2.19 ignores the attribute filter); give the run's trace "
                "ids (…/TRACE_ID,TRACE_ID)"
            )
        found |= traces
        if len(found) > MAX_TRACES:
            raise _too_many(get.named, run_id)
        answers.append(answer)
    if not answers:
        raise _none(get.named, run_id, window, f" in its {len(listed)} services")
    return answers


def tempo_trace_ids(get: Downloads, base_url: str, run_id: str, window: Window) -> list[str]:
    """The ids of the traces whose spans carry ``run_id``, by TraceQL. Raises SourceError
    naming the source when there is none, or more than :data:`MAX_TRACES`."""
    # A TraceQL string is a Go string literal: JSON's escapes of a printable string are its.
    literal = json.dumps(run_id, ensure_ascii=False)
    query = {
        "q": f"{{ span.{A.REPLAY_RUN_ID} = {literal} }}",
        "start": str(window.start),
        "end": str(window.end),
        "limit": str(MAX_TRACES + 1),
        "spss": "1",  # the ids are all that is read
    }
    answer = answer_object(get.get(f"{base_url}/api/search?{urlencode(query)}"), get.named)
    traces = answer.get("traces", [])
    if not isinstance(traces, list):
        raise SourceError(f"{get.named}: the server's search answer is not Tempo's")
    ids: dict[str, None] = {}
    for trace in traces:
        trace_id = trace.get("traceID") if isinstance(trace, Mapping) else None
        if not isinstance(trace_id, str) or not _HEX_ID.fullmatch(trace_id):
            raise SourceError(f"{get.named}: the search answered a trace without a trace id")
        ids[trace_id.lower().rjust(32, "0")] = None  # Tempo leaves out leading zeros
    if not ids:
        raise _none(get.named, run_id, window)
    if len(ids) > MAX_TRACES:
        raise _too_many(get.named, run_id)
    return list(ids)


def run_ids(answer: bytes, get: Downloads) -> set[str]:
    """The run ids the spans of a trace API's ``answer`` carry."""
    return {r for span in _spans(answer, get) if isinstance(r := _run_id(span), str) and r}


def _traces_carrying(answer: bytes, run_id: str, get: Downloads) -> tuple[set[str], set[str]]:
    """The trace ids in ``answer``, and those of its traces with a span carrying ``run_id``."""
    spans = _spans(answer, get)
    traces = {str(span["trace_id"]) for span in spans}
    return traces, {str(span["trace_id"]) for span in spans if _run_id(span) == run_id}


def _spans(answer: bytes, get: Downloads) -> list[dict[str, Any]]:
    return span_dicts(documents(answer, get.named, get.limits))


def _run_id(span: Mapping[str, Any]) -> Any:
    return span["attributes"].get(A.REPLAY_RUN_ID)


def _none(named: str, run_id: str, window: Window, where: str = "") -> SourceError:
    return SourceError(
        f"{named}: no trace carries {A.REPLAY_RUN_ID} {run_id!r} {window}{where} "
        "(an older run: give its trace ids, …/TRACE_ID,TRACE_ID)"
    )


def _too_many(named: str, run_id: str) -> SourceError:
    return SourceError(
        f"{named}: more than {MAX_TRACES} traces carry {A.REPLAY_RUN_ID} {run_id!r}; "
        "import the run from the store or the Collector's archive that recorded it"
    )
