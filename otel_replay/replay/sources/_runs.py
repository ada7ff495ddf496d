"""A run's spans, and which of them are its steps."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from otel_replay import attributes as A
from otel_replay.codecs import INFERENCE_OPERATIONS
from otel_replay.envelope import ENVELOPE_KINDS
from otel_replay.replay.sources._spans import shown

__all__ = [
    "SERVED_KINDS",
    "Span",
    "SpanRun",
    "attrs_of",
    "has_steps",
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
    operation = attrs_of(span).get("gen_ai.operation.name")
    return isinstance(operation, str) and operation in INFERENCE_OPERATIONS


def step_index(span: Span) -> int | None:
    """``replay.step.index`` of a span, or None when it has none.

    Raises ValueError naming the span when the attribute is there but is not a step index
    (a whole number from 0 to 2**63 - 1): such a span is not silently left out.
    """
    value = attrs_of(span).get(A.REPLAY_STEP_INDEX)
    if value is None:
        return None
    index = int_value(value)
    if index is None or index < 0:
        raise ValueError(
            f"span {span.get('span_id')} has replay.step.index {shown(value)}, which is not "
            "a step index (a whole number from 0)"
        )
    return index


def int_value(value: Any) -> int | None:
    """An attribute that should be a signed 64-bit int (OTLP JSON may carry it as a
    string), or None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdecimal() and len(value.strip()) <= 19:
        value = int(value)
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return value
    return None


def step_spans(run: SpanRun) -> dict[int, Span] | None:
    """The step spans of a run by step index, or None when the run has none that carry
    ``replay.step.index`` (then its inference spans are its steps: :func:`inference_steps`).

    Raises ValueError naming the index when two different spans claim one step.
    """
    out: dict[int, Span] = {}
    for span in run.spans:
        kind = attrs_of(span).get(A.REPLAY_STEP_KIND, "llm")
        if not isinstance(kind, str) or kind not in SERVED_KINDS:
            continue
        index = step_index(span)
        if index is None:
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


def has_steps(run: SpanRun) -> bool:
    """True when some span of ``run`` is a step (or when two claim one: the build says so)."""
    try:
        return bool(step_spans(run) or inference_steps(run))
    except ValueError:
        return True
