"""An in-memory OTel pipeline around :class:`ReplayInstrumentor`, for tests."""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_replay.capture.instrumentor import ReplayInstrumentor
from otel_replay.runs import start_process_run

__all__ = ["CaptureKit"]


class CaptureKit:
    """Instruments httpx/httpx2 into an in-memory exporter and metric reader.

    Use as a context manager; on exit the instrumentation is removed and the providers shut
    down. Each kit starts a fresh process run, so step indices begin at 0. ``spans()`` gives
    finished spans as plain dicts in start order, content attributes JSON-decoded and parents
    given as positions in that list.
    """

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.metric_reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.metric_reader])
        self.instrumentor = ReplayInstrumentor()

    def __enter__(self) -> CaptureKit:
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
        self.instrumentor.uninstrument()
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()

    def raw_spans(self) -> tuple[ReadableSpan, ...]:
        """The finished SDK spans, in the order they ended."""
        return self.exporter.get_finished_spans()

    def spans(self) -> list[dict[str, Any]]:
        """Finished spans as plain dicts: name, kind, parent (index into this list's span
        order by start, or None), status, attributes (JSON content decoded), events."""
        finished = sorted(self.raw_spans(), key=lambda s: s.start_time or 0)
        order = {s.context.span_id: i for i, s in enumerate(finished) if s.context is not None}
        out = []
        for span in finished:
            attrs: dict[str, Any] = dict(span.attributes or {})
            for key in (
                "gen_ai.input.messages",
                "gen_ai.output.messages",
                "gen_ai.system_instructions",
                "gen_ai.tool.definitions",
            ):
                if isinstance(attrs.get(key), str):
                    attrs[key] = json.loads(attrs[key])
            for key, value in attrs.items():
                if isinstance(value, tuple):
                    attrs[key] = list(value)
            out.append(
                {
                    "name": span.name,
                    "kind": span.kind.name,
                    "parent": order.get(span.parent.span_id) if span.parent else None,
                    "status": span.status.status_code.name,
                    "attributes": attrs,
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
