"""A run's spans, and which of them are its steps.

Which spans make a run is decided in :mod:`._group`. The steps of a run are its spans with
``replay.step.index`` (of the kinds a replay serves), or, for a run without them, its
inference spans in start-time order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from otel_replay import attributes as A
from otel_replay.capture._envelope import ENVELOPE_KINDS
from otel_replay.capture.codecs import INFERENCE_OPERATIONS

__all__ = [
    "SERVED_KINDS",
    "Span",
    "SpanRun",
    "attrs_of",
    "inference_steps",
    "int_value",
    "is_inference",
    "span_start",
    "step_index",
    "step_spans",
]

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


def span_start(span: Span) -> int | None:
    """A span's start (Unix nanoseconds), or None when it has none."""
    start = span.get("start_ns")
    return start if isinstance(start, int) and start > 0 else None


def is_inference(span: Span) -> bool:
    """True for a GenAI model-call span (``gen_ai.operation.name`` chat and the like)."""
    return attrs_of(span).get("gen_ai.operation.name") in INFERENCE_OPERATIONS


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
        key=lambda s: (span_start(s) or 0, str(s.get("span_id"))),
    )
    return dict(enumerate(ordered))
