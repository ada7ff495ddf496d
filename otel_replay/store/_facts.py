"""What spans say about their runs and steps: times, status, commit, seed, model, tokens.

Pure functions over span dicts (the store's shape, or OTLP JSON attribute lists). The index
takes a run's times, error status, commit and seed from its spans, and a step's provider,
model and token counts from the span whose ``replay.step.index`` is the step's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from otel_replay.store._spans import stays_inline

__all__ = [
    "NO_FACTS",
    "RunFacts",
    "SpanFacts",
    "StepFacts",
    "attribute",
    "facts_of",
    "merge_facts",
    "span_facts",
    "span_run_id",
]


def attribute(span: Mapping[str, Any], key: str) -> Any:
    """The value of attribute ``key`` of a span dict, or None.

    Accepts ``attributes`` as a plain mapping or as an OTLP JSON list of ``{key, value}``.
    """
    attrs = span.get("attributes")
    if type(attrs) is dict or isinstance(attrs, Mapping):
        return attrs.get(key)
    if isinstance(attrs, list):
        for item in attrs:
            if isinstance(item, Mapping) and item.get("key") == key:
                value = item.get("value")
                if isinstance(value, Mapping) and len(value) == 1:
                    inner = next(iter(value.values()))
                    return int(inner) if "intValue" in value else inner
                return value
    return None


def _first(span: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if span.get(key) is not None:
            return span[key]
    return None


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def _is_error(span: Mapping[str, Any]) -> bool:
    status = span.get("status")
    code = status.get("code", status.get("status_code")) if isinstance(status, Mapping) else status
    return str(code).upper() in ("ERROR", "STATUS_CODE_ERROR", "2", "STATUSCODE.ERROR")


StepFacts = tuple[str | None, str | None, int | None, int | None]
"""What a step's span says about it: provider, model, tokens in and out (a plain tuple, which
the garbage collector stops tracking)."""

NO_FACTS: StepFacts = (None, None, None, None)


@dataclass(slots=True)
class RunFacts:
    """What a run's spans say about it."""

    start_ns: int | None = None
    end_ns: int | None = None
    error: bool = False
    commit: str | None = None
    seed: int | None = None
    steps: dict[int, StepFacts] = field(default_factory=dict)


def span_run_id(span: Mapping[str, Any]) -> str | None:
    """The ``replay.run.id`` of a span dict, or None."""
    run_id = attribute(span, "replay.run.id")
    return run_id if isinstance(run_id, str) and run_id else None


SpanFacts = tuple[
    int | None,
    int | None,
    bool,
    str | None,
    int | None,
    int | None,
    str | None,
    str | None,
    int | None,
    int | None,
]
"""What one span says: start, end, error, commit, seed, step index, provider, model, tokens in
and out (a tuple of plain values, cheap to keep until the flush)."""


def facts_of(span: Mapping[str, Any]) -> SpanFacts:
    """The facts one span dict states (see :func:`span_facts`).

    Strings a record takes out of a span (``_spans.stays_inline``) state nothing: the same
    facts then come out of the span as given and of its record.
    """
    index = _int(attribute(span, "replay.step.index"))
    provider = model = tokens_in = tokens_out = None
    if index is not None:
        provider = _text(attribute(span, "gen_ai.provider.name"))
        model = _text(attribute(span, "gen_ai.request.model")) or _text(
            attribute(span, "gen_ai.response.model")
        )
        tokens_in = _int(attribute(span, "gen_ai.usage.input_tokens"))
        tokens_out = _int(attribute(span, "gen_ai.usage.output_tokens"))
    return (
        _int(_first(span, "start_ns", "start_time_unix_nano", "startTimeUnixNano")),
        _int(_first(span, "end_ns", "end_time_unix_nano", "endTimeUnixNano")),
        _is_error(span),
        _text(attribute(span, "vcs.ref.head.revision")) or None,
        _int(attribute(span, "replay.seed")),
        index,
        provider,
        model,
        tokens_in,
        tokens_out,
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and stays_inline(value) else None


def merge_facts(items: Iterable[tuple[str, SpanFacts]]) -> dict[str, RunFacts]:
    """Facts per run id from ``(run id, facts of one span)`` pairs."""
    facts: dict[str, RunFacts] = {}
    for run_id, (start, end, error, commit, seed, index, provider, model, t_in, t_out) in items:
        run = facts.get(run_id)
        if run is None:
            run = facts[run_id] = RunFacts()
        if start is not None:
            run.start_ns = start if run.start_ns is None else min(run.start_ns, start)
        if end is not None:
            run.end_ns = end if run.end_ns is None else max(run.end_ns, end)
        run.error = run.error or error
        if commit is not None:
            run.commit = commit
        if seed is not None:
            run.seed = seed
        if index is not None:
            old = run.steps.get(index, NO_FACTS)
            run.steps[index] = (
                provider if provider is not None else old[0],
                model if model is not None else old[1],
                t_in if t_in is not None else old[2],
                t_out if t_out is not None else old[3],
            )
    return facts


def span_facts(spans: Iterable[Mapping[str, Any]]) -> dict[str, RunFacts]:
    """Facts per run id from span dicts (spans without ``replay.run.id`` are skipped).

    A run is in error when any of its spans has an error status; provider, model and token
    counts of step *i* come from the span with ``replay.step.index`` *i*.
    """
    return merge_facts(
        (run_id, facts_of(span)) for span in spans if (run_id := span_run_id(span)) is not None
    )
