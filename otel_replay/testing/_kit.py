"""An in-memory OTel pipeline around :class:`ReplayInstrumentor`, for tests, with span ids
that count and a clock that steps, so a test can assert whole spans."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

import opentelemetry.sdk.trace as sdk_trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from otel_replay import _clock
from otel_replay.capture.instrumentor import ReplayInstrumentor
from otel_replay.runs import start_process_run

__all__ = ["CaptureKit", "IncrementalIdGenerator", "TimeGenerator"]

_CONTENT = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
)
"""Attributes holding JSON text, decoded in the kit's dicts."""

_MACHINE = {"vcs.ref.head.revision": "<revision>", "replay.code.dirty": "<dirty>"}
"""Attributes that depend on the machine and checkout, shown as placeholders by
:meth:`CaptureKit.whole_spans`."""


class IncrementalIdGenerator(IdGenerator):
    """Trace ids and span ids 1, 2, 3..., each counted on its own (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._trace_id = 0
        self._span_id = 0

    def generate_trace_id(self) -> int:
        with self._lock:
            self._trace_id += 1
            return self._trace_id

    def generate_span_id(self) -> int:
        with self._lock:
            self._span_id += 1
            return self._span_id


class TimeGenerator:
    """A clock in Unix nanoseconds: each reading is ``step_ns`` after the one before, the
    first ``start_ns + step_ns`` (thread-safe)."""

    def __init__(self, start_ns: int = 0, step_ns: int = 1_000_000_000) -> None:
        self._lock = threading.Lock()
        self._now = start_ns
        self.step_ns = step_ns

    def __call__(self) -> int:
        with self._lock:
            self._now += self.step_ns
            return self._now

    def advance(self, ns: int) -> None:
        """Let ``ns`` pass before the next reading (a test's wait, without the wait)."""
        with self._lock:
            self._now += ns


class CaptureKit:
    """Instruments httpx/httpx2 into an in-memory exporter and metric reader.

    Use as a context manager; on exit the instrumentation is removed and the providers shut
    down. Each kit starts a fresh process run, so step indices begin at 0. ``spans()`` gives
    finished spans as plain dicts in start order, content attributes JSON-decoded and parents
    given as positions in that list.

    With ``ids`` (an SDK ``IdGenerator``, say :class:`IncrementalIdGenerator`) the tracer
    provider draws its ids from it; with ``clock`` (say :class:`TimeGenerator`) every span
    time, span event time, step time and run id time reads it while the kit is open (the SDK's
    clock and otel-replay's own, process-wide). ``deterministic=True`` gives both.
    """

    def __init__(
        self,
        *,
        ids: IdGenerator | None = None,
        clock: Callable[[], int] | None = None,
        deterministic: bool = False,
    ) -> None:
        if deterministic:
            ids = ids or IncrementalIdGenerator()
            clock = clock or TimeGenerator()
        self.clock = clock
        self._real_time_ns: Callable[[], int] | None = None
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(id_generator=ids)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.metric_reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.metric_reader])
        self.instrumentor = ReplayInstrumentor()

    def __enter__(self) -> CaptureKit:
        if self.clock is not None:
            # The SDK reads the time through this module global, for span and event times.
            self._real_time_ns = getattr(sdk_trace, "time_ns")  # noqa: B009 - not exported
            setattr(sdk_trace, "time_ns", self.clock)  # noqa: B010 - but read
            _clock.use(self.clock)
        start_process_run()
        self.instrumentor.instrument(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider
        )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.instrumentor.uninstrument()
            self.tracer_provider.shutdown()
            self.meter_provider.shutdown()
        finally:
            if self._real_time_ns is not None:
                setattr(sdk_trace, "time_ns", self._real_time_ns)  # noqa: B010
                _clock.use(None)

    def raw_spans(self) -> tuple[ReadableSpan, ...]:
        """The finished SDK spans, in the order they ended."""
        return self.exporter.get_finished_spans()

    def spans(self) -> list[dict[str, Any]]:
        """Finished spans as plain dicts: name, kind, parent (index into this list's span
        order by start, or None), status, attributes (JSON content decoded), events."""
        finished = sorted(self.raw_spans(), key=lambda s: s.start_time or 0)
        order = {s.context.span_id: i for i, s in enumerate(finished) if s.context is not None}
        return [
            {
                "name": span.name,
                "kind": span.kind.name,
                "parent": order.get(span.parent.span_id) if span.parent else None,
                "status": span.status.status_code.name,
                "attributes": _plain(span),
                "scope": span.instrumentation_scope.name if span.instrumentation_scope else None,
            }
            for span in finished
        ]

    def whole_spans(self) -> list[dict[str, Any]]:
        """Finished spans, whole, in the order they started: name, kind, trace and span id,
        parent span id (None for a root), start and end time, status (code and description),
        attributes as in :meth:`spans`, events, scope. Values that differ from one machine or
        run to the next are replaced: run ids by ``run-1``, ``run-2``... in order of first
        appearance, the code's revision and dirtiness by ``<revision>`` and ``<dirty>``, a
        streamed response's chunk times by their count. Meant for a kit with ``ids`` and
        ``clock`` (``deterministic=True``), whose ids and times then repeat."""
        finished = sorted(self.raw_spans(), key=lambda s: (s.start_time or 0, _span_id(s)))
        runs: dict[str, str] = {}
        out = []
        for span in finished:
            attrs = _plain(span)
            for key in ("replay.run.id", "replay.parent.run.id"):
                if isinstance(attrs.get(key), str):
                    attrs[key] = runs.setdefault(attrs[key], f"run-{len(runs) + 1}")
            for key, shown in _MACHINE.items():
                if key in attrs:
                    attrs[key] = shown
            if "replay.response.chunk.times" in attrs:
                attrs["replay.response.chunk.times"] = len(attrs["replay.response.chunk.times"])
            out.append(
                {
                    "name": span.name,
                    "kind": span.kind.name,
                    "trace_id": span.context.trace_id if span.context else None,
                    "span_id": _span_id(span),
                    "parent": span.parent.span_id if span.parent else None,
                    "start_time": span.start_time,
                    "end_time": span.end_time,
                    "status": {
                        "code": span.status.status_code.name,
                        "description": span.status.description,
                    },
                    "attributes": attrs,
                    "events": [
                        {
                            "name": event.name,
                            "timestamp": event.timestamp,
                            "attributes": dict(event.attributes or {}),
                        }
                        for event in span.events
                    ],
                    "scope": span.instrumentation_scope.name
                    if span.instrumentation_scope
                    else None,
                }
            )
        return out

    def metrics(self) -> dict[str, list[dict[str, Any]]]:
        """Metric name → its data points as dicts (attributes, count/sum/bounds or value)."""
        data = self.metric_reader.get_metrics_data()
        out: dict[str, list[dict[str, Any]]] = {}
        if data is None:
            return out
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    points = out.setdefault(metric.name, [])
                    for point in metric.data.data_points:
                        entry: dict[str, Any] = {"attributes": dict(point.attributes or {})}
                        for field in ("count", "sum", "explicit_bounds", "value"):
                            if hasattr(point, field):
                                value = getattr(point, field)
                                entry[field] = list(value) if field == "explicit_bounds" else value
                        points.append(entry)
        return out

    def clear(self) -> None:
        """Forget the spans finished so far."""
        self.exporter.clear()


def _span_id(span: ReadableSpan) -> int:
    return span.context.span_id if span.context else 0


def _plain(span: ReadableSpan) -> dict[str, Any]:
    """The span's attributes with JSON content decoded and tuples made lists."""
    attrs: dict[str, Any] = dict(span.attributes or {})
    for key in _CONTENT:
        if isinstance(attrs.get(key), str):
            attrs[key] = json.loads(attrs[key])
    for key, value in attrs.items():
        if isinstance(value, tuple):
            attrs[key] = list(value)
    return attrs
