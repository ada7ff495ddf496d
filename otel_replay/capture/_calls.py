"""Model calls whose span another instrumentation owns: one HTTP attempt span per attempt
beneath it, the GenAI attributes on the call span, and the call's metrics (:class:`CallSpans`)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.trace import Span

from otel_replay import attributes as A
from otel_replay.capture._metrics import GenAiMetrics

__all__ = ["CALL_SPANS", "UNMETERED_SCOPES", "CallSpans", "attempt_attributes"]

UNMETERED_SCOPES = ("com.anthropic.sdk.python",)
"""Instrumentation scopes (and their ``.``-suffixed variants, such as the SDK's platform
clients) whose call spans come with no GenAI metrics of their own."""

CALLS_MAX = 4096
"""Calls remembered at most; the oldest are forgotten beyond (a call span whose end this
processor never sees: another tracer provider's, or one dropped without ending)."""


_RESPONSE_PREFIXES = ("gen_ai.output.", "gen_ai.response.", "gen_ai.usage.")
_OUR_READINGS = (
    (A.REPLAY_INPUT_MESSAGES, "gen_ai.input.messages"),
    (A.REPLAY_OUTPUT_MESSAGES, "gen_ai.output.messages"),
)
"""An attempt's own reading of its request and answer, and the call span's key it stands for."""


def attempt_attributes(attempt: Mapping[str, Any], call: Mapping[str, Any]) -> dict[str, Any]:
    """An attempt span's attributes with the GenAI ones of its call span, as a model-call span
    of ours would carry them, for rebuilding the attempt as a step (a semantic replay of a
    body too large to travel inline reads them): the request's always, the response's only for
    an attempt that succeeded (the call's response is its successful attempt's); the input and
    output messages the attempt's own (``replay.input.messages``, ``replay.output.messages``)
    where it has them."""
    status = attempt.get("http.response.status_code")
    failed = "error.type" in attempt or (isinstance(status, int) and status >= 400)
    merged = {
        key: value
        for key, value in call.items()
        if key.startswith("gen_ai.") and not (failed and key.startswith(_RESPONSE_PREFIXES))
    }
    merged.update(attempt)
    # What the capture read, whatever the owner wrote over it.
    for ours, key in _OUR_READINGS:
        if (value := attempt.get(ours)) is not None:
            merged[key] = value
    return merged


def _meters_itself(span: Span) -> bool:
    scope = getattr(span, "instrumentation_scope", None)
    name = getattr(scope, "name", None) or ""
    return not any(name == s or name.startswith(s + ".") for s in UNMETERED_SCOPES)


class _Call:
    __slots__ = ("attempts", "metrics")

    def __init__(self, metrics: GenAiMetrics | None) -> None:
        self.attempts = 0
        self.metrics = metrics


class CallSpans(SpanProcessor):
    """The calls in flight under other instrumentations' spans: their attempts, and their
    metrics when the owner records none. Thread-safe; one per process (:data:`CALL_SPANS`)."""

    def __init__(self, limit: int = CALLS_MAX) -> None:
        self._calls: dict[int, _Call] = {}
        self._lock = threading.Lock()
        self._limit = limit

    def attempt(self, call: Span, metrics: GenAiMetrics) -> int:
        """Count one attempt of the call ``call`` covers; its resend count (0 for the first).

        ``metrics`` records the call once it ends, unless the span's owner records its own.
        """
        span_id = call.get_span_context().span_id
        with self._lock:
            known = self._calls.get(span_id)
            if known is None:
                known = _Call(None if _meters_itself(call) else metrics)
                self._calls[span_id] = known
                if len(self._calls) > self._limit:
                    del self._calls[next(iter(self._calls))]
            known.attempts += 1
            return known.attempts - 1

    def on_start(self, span: SdkSpan, parent_context: Context | None = None) -> None:
        """Nothing to do."""

    def on_end(self, span: ReadableSpan) -> None:
        """A call span ended: forget the call, recording its metrics when they are ours."""
        if not self._calls or span.context is None:
            return  # the common case: no call under another owner's span is in flight
        with self._lock:
            known = self._calls.pop(span.context.span_id, None)
        if known is None or known.metrics is None:
            return
        start, end = span.start_time, span.end_time
        if start is not None and end is not None:
            known.metrics.record(span.attributes or {}, max(0, end - start) / 1e9)

    def shutdown(self) -> None:
        """Nothing to do."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is held."""
        return True


CALL_SPANS = CallSpans()
"""The process's calls; the instrumentor adds it to each tracer provider it records with."""
