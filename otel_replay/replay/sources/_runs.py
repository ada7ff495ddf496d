"""Span dicts into runs: which spans belong to which run, and which of them are steps.

A span with ``replay.run.id`` belongs to that run; the other spans of its trace (an httpx
instrumentation's, say) are its neighbours, not steps. A trace with no replay kit at all (made
by another GenAI instrumentation) is a run of its own, named by its trace id, when it holds
GenAI inference spans.

The steps of a run are its spans with ``replay.step.index`` (LLM and HTTP steps: tool steps
are not served by a transport), or, for a run without them, its inference spans in start-time
order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from otel_replay import attributes as A
from otel_replay.capture._envelope import ENVELOPE_KINDS
from otel_replay.capture.codecs import INFERENCE_OPERATIONS

__all__ = ["SERVED_KINDS", "SpanRun", "group_runs", "step_spans"]

SERVED_KINDS = frozenset({"llm", "http", *ENVELOPE_KINDS})
"""``replay.step.kind`` values a replay serves: calls over HTTP, and tools, values and
checkpoints."""

Span = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class SpanRun:
    """The spans of one run (every span of it, steps or not), in source order."""

    run_id: str
    spans: tuple[Span, ...]


def attrs_of(span: Span) -> Mapping[str, Any]:
    """A span dict's attributes (empty when it has none)."""
    attrs = span.get("attributes")
    return attrs if isinstance(attrs, Mapping) else {}


def _run_id(span: Span) -> str | None:
    value = attrs_of(span).get(A.REPLAY_RUN_ID)
    return value if isinstance(value, str) and value else None


def is_inference(span: Span) -> bool:
    """True for a GenAI model-call span (``gen_ai.operation.name`` chat and the like)."""
    return attrs_of(span).get("gen_ai.operation.name") in INFERENCE_OPERATIONS


def group_runs(spans: Iterable[Span]) -> list[SpanRun]:
    """The runs among ``spans``, oldest first; a span seen twice (same trace and span id)
    counts once."""
    seen: set[tuple[Any, Any]] = set()
    by_run: dict[str, list[Span]] = {}
    by_trace: dict[str, list[Span]] = {}
    kit_traces: set[Any] = set()
    for span in spans:
        key = (span.get("trace_id"), span.get("span_id"))
        if key in seen:
            continue
        seen.add(key)
        run_id = _run_id(span)
        if run_id is not None:
            by_run.setdefault(run_id, []).append(span)
            kit_traces.add(span.get("trace_id"))
        else:
            by_trace.setdefault(str(span.get("trace_id")), []).append(span)
    for trace_id, members in by_trace.items():
        if trace_id not in kit_traces and any(is_inference(s) for s in members):
            by_run[trace_id] = members
    runs = [SpanRun(run_id, tuple(members)) for run_id, members in by_run.items()]
    runs.sort(key=lambda run: (min(_start(s) for s in run.spans), run.run_id))
    return runs


def _start(span: Span) -> int:
    start = span.get("start_ns")
    return start if isinstance(start, int) else 0


def step_index(span: Span) -> int | None:
    """``replay.step.index`` of a span, or None."""
    return int_value(attrs_of(span).get(A.REPLAY_STEP_INDEX))


def int_value(value: Any) -> int | None:
    """An attribute that should be an int (OTLP JSON may carry it as a string), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def step_spans(run: SpanRun) -> dict[int, Span] | None:
    """The step spans of a run by step index, or None when the run has none that carry
    ``replay.step.index`` (then its inference spans are its steps: :func:`inference_steps`).

    Raises ValueError naming the index when two different spans claim one step.
    """
    out: dict[int, Span] = {}
    for span in run.spans:
        index = step_index(span)
        if index is None:
            continue
        kind = attrs_of(span).get(A.REPLAY_STEP_KIND, "llm")
        if kind not in SERVED_KINDS:
            continue
        if index in out:
            raise ValueError(
                f"spans {out[index].get('span_id')} and {span.get('span_id')} both claim step "
                f"{index}"
            )
        out[index] = span
    return out or None


def inference_steps(run: SpanRun) -> dict[int, Span]:
    """A run's inference spans in start-time order, numbered from 0."""
    ordered = sorted(
        (s for s in run.spans if is_inference(s)),
        key=lambda s: (_start(s), str(s.get("span_id"))),
    )
    return dict(enumerate(ordered))
