"""Which spans make which run, and how a user names one run among several."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from otel_replay import attributes as A
from otel_replay.replay.sources._runs import (
    Span,
    SpanRun,
    attrs_of,
    inference_steps,
    is_inference,
    span_start,
    step_index,
    step_spans,
)

__all__ = [
    "IDLE_GAP_NS",
    "GroupingError",
    "RunSummary",
    "describe",
    "group_runs",
    "process_key",
    "select",
    "summary",
]

IDLE_GAP_NS = 300 * 10**9
"""The idle gap that splits a process's lone calls into runs: longer than an agent waits for a
tool or a model, shorter than the pause between a long-lived process's jobs."""

_LISTED = 20
"""Most runs an error message lists, so it stays one readable line."""


class GroupingError(ValueError):
    """Spans that cannot be placed in a run; the caller adds the source's name."""


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What a listing says of a run, so a user can tell it from the others."""

    run_id: str
    start_ns: int | None
    steps: int


def group_runs(spans: Iterable[Span]) -> list[SpanRun]:
    """The runs among ``spans``, oldest first (see the module's rules); a span seen twice
    (same trace and span id, same content) counts once, and two different spans that share
    their ids (the SDK drew them from the application's ``random``, which a seeded run made
    repeat, before otel-replay gave it its own) are both kept: neither is lost.

    Raises GroupingError naming the span when a lone call that shares its process with other
    calls has no start time.
    """
    seen: dict[tuple[Any, Any], Span] = {}
    by_run: dict[str, list[Span]] = {}
    by_trace: dict[str, list[Span]] = {}
    kit_traces: set[str] = set()
    kit_runs: set[str] = set()
    for span in spans:
        key = (span.get("trace_id"), span.get("span_id"))
        first = seen.setdefault(key, span)
        if first is not span and _content(first) == _content(span):
            continue  # exported twice (a retry, two pipelines): one span
        run_id = attrs_of(span).get(A.REPLAY_RUN_ID)
        if isinstance(run_id, str) and run_id:
            by_run.setdefault(run_id, []).append(span)
            kit_runs.add(run_id)
            kit_traces.add(str(span.get("trace_id")))
        else:
            by_trace.setdefault(str(span.get("trace_id")), []).append(span)
    lone: dict[str, list[Span]] = {}
    for trace_id, members in by_trace.items():
        if trace_id in kit_traces or not any(is_inference(s) for s in members):
            continue
        if _is_lone_call(members):
            lone[trace_id] = members
        else:
            by_run.setdefault(trace_id, members)
    for run_id, members in _group_lone_calls(lone).items():
        by_run.setdefault(run_id, members)
    runs: list[SpanRun] = []
    taken = set(by_run)
    for run_id, members in by_run.items():
        recordings = _recordings(members) if run_id in kit_runs else [members]
        runs.append(SpanRun(run_id, tuple(recordings[0])))
        number = 1
        for recording in recordings[1:]:
            number += 1
            while f"{run_id}@{number}" in taken:
                number += 1
            taken.add(f"{run_id}@{number}")
            runs.append(SpanRun(f"{run_id}@{number}", tuple(recording)))
    runs.sort(key=lambda run: (_earliest(run.spans), run.run_id))
    return runs


def select(runs: Sequence[SpanRun], wanted: str) -> list[SpanRun]:
    """The run named ``wanted``: by run id, else the run holding a trace of that id."""
    exact = [run for run in runs if run.run_id == wanted]
    if exact:
        return exact
    trace_id = wanted.strip().lower()
    return [run for run in runs if any(span.get("trace_id") == trace_id for span in run.spans)]


def summary(run: SpanRun) -> RunSummary:
    """The listing facts of a run not rebuilt yet (its step spans counted, not read)."""
    try:
        steps = step_spans(run)
    except ValueError:  # two spans claim one step: building it will say so
        steps = {}
    count = len(steps) if steps is not None else len(inference_steps(run))
    start = _earliest(run.spans)
    return RunSummary(run.run_id, start or None, count)


def describe(runs: Sequence[RunSummary]) -> str:
    """``runs`` as one line a user picks from: each id with its first span's time (UTC) and
    number of steps; past the first few, how many more."""
    shown = [
        f"{run.run_id} ({_when(run.start_ns)}, {run.steps} step{'s' * (run.steps != 1)})"
        for run in runs[:_LISTED]
    ]
    more = len(runs) - len(shown)
    tail = f", and {more} more (otel-replay import, then otel-replay runs, lists all)"
    return ", ".join(shown) + (tail if more > 0 else "") if shown else "no runs"


def _when(start_ns: int | None) -> str:
    if not start_ns:
        return "no start time"
    moment = datetime.fromtimestamp(start_ns / 1e9, timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{moment.microsecond // 1000:03d}Z"


def _earliest(spans: Sequence[Span]) -> int:
    return min((s for s in map(span_start, spans) if s is not None), default=0)


def _recordings(spans: Sequence[Span]) -> list[list[Span]]:
    """The spans of one run id by the recording that made them, oldest first.

    Spans of one process (:func:`process_key`) or of one trace belong together. Such groups
    whose steps share no index are one recording too: a worker process numbers its steps with
    its parent's counter, and may have made them under spans of its own (no trace in common);
    two recordings each number theirs from 0.
    """
    parent: dict[str, str] = {}

    def root(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = node = parent[parent[node]]
        return node

    for span in spans:
        trace, process = (
            root(f"trace {span.get('trace_id')}"),
            root(process_key(span.get("resource"))),
        )
        parent[trace] = process
    groups: dict[str, list[Span]] = {}
    for span in spans:
        groups.setdefault(root(f"trace {span.get('trace_id')}"), []).append(span)
    recordings: list[tuple[list[Span], set[int]]] = []
    for group in sorted(groups.values(), key=_earliest):
        indices = _indices(group)
        fits = next((r for r in recordings if not r[1] & indices), None)
        if fits is None:
            recordings.append((group, indices))
        else:
            fits[0].extend(group)
            fits[1].update(indices)
    return [members for members, _ in recordings]


def _indices(spans: Sequence[Span]) -> set[int]:
    """The step indexes ``spans`` claim (a bad one is left to the run's build to name)."""
    found: set[int] = set()
    for span in spans:
        with contextlib.suppress(ValueError):
            index = step_index(span)
            if index is not None:
                found.add(index)
    return found


# -- lone calls --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Call:
    """One lone-call trace: its id, root span, spans and extent (Unix nanoseconds)."""

    trace_id: str
    root: Span
    spans: Sequence[Span]
    start: int | None
    end: int | None


def _roots(spans: Sequence[Span]) -> list[Span]:
    return [span for span in spans if not span.get("parent_span_id")]


def _content(span: Span) -> dict[str, Any]:
    """What a span says, apart from where it was read (a span exported twice, by a retry or
    through two pipelines, may come with other resource or scope facts)."""
    return {k: v for k, v in span.items() if k not in ("resource", "scope")}


def _is_lone_call(spans: Sequence[Span]) -> bool:
    """True when the trace's root span (its one span without a parent) is a model call."""
    roots = _roots(spans)
    return len(roots) == 1 and is_inference(roots[0])


def process_key(resource: Any) -> str:
    """What identifies the process a span came from, as a string (the module's rule 3)."""
    attrs: Mapping[str, Any] = resource if isinstance(resource, Mapping) else {}
    service = [attrs.get("service.namespace"), attrs.get("service.name")]
    instance = attrs.get("service.instance.id")
    key: list[Any]
    if instance not in (None, ""):
        key = ["instance", *service, str(instance)]
    elif attrs.get("process.pid") not in (None, ""):
        host = attrs.get("host.id") or attrs.get("host.name")
        key = ["pid", *service, host, str(attrs["process.pid"])]
    else:
        key = ["resource", attrs]
    return json.dumps(key, sort_keys=True, default=str)


def _group_lone_calls(traces: Mapping[str, Sequence[Span]]) -> dict[str, list[Span]]:
    """The runs the lone-call ``traces`` (trace id to spans) make, by run id."""
    by_process: dict[str, list[_Call]] = {}
    for trace_id, spans in traces.items():
        call = _extent(trace_id, spans)
        by_process.setdefault(process_key(call.root.get("resource")), []).append(call)
    runs: dict[str, list[Span]] = {}
    for calls in by_process.values():
        for burst in _bursts(calls):
            runs[burst[0].trace_id] = [span for call in burst for span in call.spans]
    return runs


def _extent(trace_id: str, spans: Sequence[Span]) -> _Call:
    (root,) = _roots(spans)
    ends = [e for e in (span.get("end_ns") for span in spans) if isinstance(e, int) and e > 0]
    start = span_start(root)
    if start is None:
        start = min((s for s in map(span_start, spans) if s is not None), default=None)
    return _Call(trace_id, root, spans, start, max(ends, default=None))


def _bursts(calls: list[_Call]) -> list[list[_Call]]:
    """``calls`` of one process in start order, cut where the process idled past the gap."""
    if len(calls) == 1:
        return [calls]
    for call in calls:
        if call.start is None:
            raise GroupingError(
                f"span {call.root.get('name')!r} (trace {call.trace_id}) has no start time, so "
                "it cannot be placed among the other calls of its process"
            )
    calls = sorted(calls, key=lambda call: (call.start or 0, call.trace_id))
    bursts: list[list[_Call]] = []
    busy_until = 0
    for call in calls:
        start = call.start or 0
        if not bursts or start - busy_until > IDLE_GAP_NS:
            bursts.append([])
        bursts[-1].append(call)
        busy_until = max(busy_until, call.end if call.end is not None else start, start)
    return bursts
