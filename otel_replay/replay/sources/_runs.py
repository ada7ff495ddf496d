"""A run's spans, and which of them are its steps."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from otel_replay import attributes as A
from otel_replay.codecs import INFERENCE_OPERATIONS
from otel_replay.replay.sources._spans import shown
from otel_replay.step import ENVELOPE_KINDS

__all__ = [
    "SERVED_KINDS",
    "Outcome",
    "Span",
    "SpanRun",
    "attrs_of",
    "has_steps",
    "inference_steps",
    "int_value",
    "is_inference",
    "is_run_span",
    "outcome",
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

    Raises ValueError naming the index when two different spans claim one step, and naming
    the span when a step's ``replay.step.kind`` is none a replay serves (a newer otel-replay's,
    or damaged): a run is never replayed without one of its steps.
    """
    out: dict[int, Span] = {}
    for span in run.spans:
        index = step_index(span)
        if index is None:
            continue
        kind = attrs_of(span).get(A.REPLAY_STEP_KIND, "llm")
        if not isinstance(kind, str) or kind not in SERVED_KINDS:
            raise ValueError(
                f"span {span.get('span_id')} (step {index}) has replay.step.kind "
                f"{shown(kind)}, which this otel-replay does not replay (it knows "
                f"{', '.join(sorted(SERVED_KINDS))})"
            )
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


def is_run_span(span: Span, run_id: str) -> bool:
    """A span the capture opens for a run itself (a ``run()`` block's, a process run's root),
    not for one of its steps."""
    attrs = attrs_of(span)
    return (
        attrs.get("gen_ai.operation.name") == "invoke_agent"
        and attrs.get(A.REPLAY_RUN_ID) == run_id
        and A.REPLAY_STEP_INDEX not in attrs
    )


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a run ended, as its spans tell: ``ok``; ``error`` (``error_type``: the run's own
    error); ``incomplete`` when the spans hold it only in part (``missing`` says what is not
    there: spans are exported as they end, so a run read before its last spans arrived)."""

    status: Literal["ok", "error", "incomplete"]
    error_type: str | None = None
    missing: str | None = None


_ENTRY_KINDS = frozenset({"SERVER", "CONSUMER"})
"""Span kinds whose parent may be another process's span, exported elsewhere."""


def outcome(run: SpanRun, steps: Mapping[int, Span] | None) -> Outcome:
    """How ``run`` ended; ``steps`` are its step spans by ``replay.step.index`` (None: it has
    none, its spans are another instrumentation's).

    A run otel-replay recorded is incomplete when a step below its last has no span, or when
    a step names as its run's own span (``replay.run.span_id``: the ``run()`` block's, or the
    process run's root) one it lacks: that span ends after the steps. Another
    instrumentation's run is incomplete when a span's parent is missing (a span that entered
    from another process, a server or consumer span, may have its parent elsewhere).
    """
    missing = _missing(run, steps)
    if missing is not None:
        return Outcome("incomplete", _error_type(run), missing)
    error_type = _error_type(run)
    return Outcome("ok" if error_type is None else "error", error_type)


def _missing(run: SpanRun, steps: Mapping[int, Span] | None) -> str | None:
    ids = {(span.get("trace_id"), span.get("span_id")) for span in run.spans}
    if steps is None:
        for span in run.spans:
            parent = span.get("parent_span_id")
            entry = span.get("kind") in _ENTRY_KINDS
            if parent and not entry and (span.get("trace_id"), parent) not in ids:
                return f"the parent {parent} of span {span.get('span_id')}"
        return None
    gaps = sorted(set(range(max(steps, default=-1) + 1)) - set(steps))
    if gaps:
        return f"the span of step {gaps[0]}"
    for index, span in sorted(steps.items()):
        named = attrs_of(span).get(A.REPLAY_RUN_SPAN_ID)
        if isinstance(named, str) and (span.get("trace_id"), named) not in ids:
            return f"the run's own span {named} (step {index} names it)"
    return None


def _error_type(run: SpanRun) -> str | None:
    """How the run failed, as the capture wrote it on the run's own span (``runs._failed``):
    the ``error.type`` of the ``invoke_agent`` span of the run that ended last (a ``run()``
    block's, or the process run's last root span), when its status is ERROR; None when the
    run did not fail (a failed step the program got over fails no run)."""
    own = [span for span in run.spans if is_run_span(span, run.run_id)]
    if not own:
        return None
    last = max(own, key=lambda span: span.get("end_ns") or 0)
    status = last.get("status")
    if not isinstance(status, Mapping) or status.get("code") != "ERROR":
        return None
    error_type = attrs_of(last).get("error.type")
    if isinstance(error_type, str) and error_type:
        return error_type
    message = status.get("message")
    return message if isinstance(message, str) and message else "error"
