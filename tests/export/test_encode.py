"""Spans become the store's JSON-ready dicts (the shape OTLP backends decode into)."""

from __future__ import annotations

import orjson
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from otel_replay.export._encode import run_id_of, span_to_dict


def _spans() -> list:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "svc"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("scope-a")
    with tracer.start_as_current_span("parent", attributes={"replay.run.id": "r_1"}) as parent:
        child = tracer.start_span(
            "child",
            kind=SpanKind.CLIENT,
            attributes={"n": 3, "xs": (1, 2), "ok": True, "f": 0.5, "big": 2**70},
            links=[Link(parent.get_span_context(), {"why": "test"})],
        )
        child.add_event("chunk", {"size": 4}, timestamp=123)
        child.set_status(Status(StatusCode.ERROR, "boom"))
        child.end()
    provider.shutdown()
    return sorted(exporter.get_finished_spans(), key=lambda s: s.name)


def test_a_span_becomes_a_json_ready_dict() -> None:
    child, parent = _spans()
    data = span_to_dict(child)
    ctx, parent_ctx = child.context, parent.context
    assert data == {
        "name": "child",
        "kind": "CLIENT",
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "parent_span_id": f"{parent_ctx.span_id:016x}",
        "start_ns": child.start_time,
        "end_ns": child.end_time,
        "status": {"code": "ERROR", "message": "boom"},
        "attributes": {"n": 3, "xs": [1, 2], "ok": True, "f": 0.5, "big": str(2**70)},
        "events": [{"name": "chunk", "time_ns": 123, "attributes": {"size": 4}}],
        "links": [
            {
                "trace_id": f"{parent_ctx.trace_id:032x}",
                "span_id": f"{parent_ctx.span_id:016x}",
                "attributes": {"why": "test"},
            }
        ],
        "resource": dict(child.resource.attributes),
        "scope": "scope-a",
    }
    assert data["resource"]["service.name"] == "svc"
    orjson.dumps(data)
    root = span_to_dict(parent)
    assert root["parent_span_id"] is None and root["status"] == {"code": "UNSET", "message": ""}


def test_only_recorded_spans_have_a_run_id() -> None:
    child, parent = _spans()
    assert run_id_of(parent) == "r_1" and run_id_of(child) is None


def test_a_lone_surrogate_does_not_cost_the_span() -> None:
    (child, _) = _spans()
    child._attributes = {"text": "bad \ud800 text"}  # type: ignore[attr-defined]
    data = span_to_dict(child)
    orjson.dumps(data)
    assert data["attributes"]["text"].startswith("bad ")
