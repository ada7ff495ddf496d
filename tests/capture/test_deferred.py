"""Deferred step work: behind batch processors, spans end on the worker, complete."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from otel_replay.capture._deferred import FINISHER, DrainProcessor, Finisher
from otel_replay.capture._run import start_process_run
from otel_replay.capture.instrumentor import ReplayInstrumentor

REQUEST = json.dumps(
    {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Where is my order?"}]}
).encode()
RESPONSE = json.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "It ships Friday."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }
).encode()


class _Complete(SpanExporter):
    """Keeps the attributes each span had when it was exported."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.seen.extend((s.name, dict(s.attributes or {})) for s in spans)
        return SpanExportResult.SUCCESS


@pytest.fixture
def batched() -> Iterator[tuple[TracerProvider, _Complete]]:
    exporter = _Complete()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    instrumentor = ReplayInstrumentor()
    start_process_run()
    instrumentor.instrument(tracer_provider=provider)
    yield provider, exporter
    instrumentor.uninstrument()
    provider.shutdown()


def _post(module: ModuleType, path: str, body: bytes) -> Any:
    def handler(request: Any) -> Any:
        return module.Response(200, content=RESPONSE, headers={"content-type": "application/json"})

    with module.Client(transport=module.MockTransport(handler)) as client:
        return client.post(
            f"http://llm.local/v1{path}", content=body, headers={"content-type": "application/json"}
        )


def test_batched_spans_are_complete_when_exported(
    batched: tuple[TracerProvider, _Complete], client_module: ModuleType
) -> None:
    provider, exporter = batched
    response = _post(client_module, "/chat/completions", REQUEST)
    assert response.content == RESPONSE  # the application sees what it always saw
    multi = provider._active_span_processor
    assert type(multi._span_processors[0]) is DrainProcessor  # deferred, drained first
    assert provider.force_flush()
    ((name, attrs),) = exporter.seen
    assert name == "chat gpt-4o-mini"
    assert attrs["replay.request.hash"] == "sha256:" + hashlib.sha256(REQUEST).hexdigest()
    assert attrs["replay.response.hash"] == "sha256:" + hashlib.sha256(RESPONSE).hexdigest()
    assert attrs["gen_ai.response.id"] == "chatcmpl-1"
    assert attrs["gen_ai.usage.output_tokens"] == 5
    assert attrs["replay.step.kind"] == "llm"
    assert attrs["replay.response.complete"] is True
    assert "replay.prompt.hash" in attrs


def test_a_plain_http_step_is_named_after_its_method(
    batched: tuple[TracerProvider, _Complete], client_module: ModuleType
) -> None:
    provider, exporter = batched
    _post(client_module, "/tools/weather?api_key=secret", b"{}")
    provider.shutdown()  # shutting down drains the deferred work first
    ((name, attrs),) = exporter.seen
    assert name == "POST"
    assert attrs["replay.step.kind"] == "http"
    assert attrs["http.response.status_code"] == 200
    assert "secret" not in attrs["url.full"]


def test_a_synchronous_processor_keeps_the_work_on_the_application_thread() -> None:
    exporter = _Complete()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert not FINISHER.defers(provider.get_tracer("t"))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    assert not FINISHER.defers(provider.get_tracer("t"))
    provider.shutdown()


def test_a_full_queue_runs_the_work_in_place() -> None:
    finisher = Finisher(max_items=0)
    ran: list[int] = []
    assert not finisher.submit(lambda: ran.append(1))
    assert ran == [] and finisher.drain(1.0)


def test_drain_waits_for_queued_work() -> None:
    finisher = Finisher()
    ran: list[int] = []
    for i in range(100):
        assert finisher.submit(lambda i=i: ran.append(i))  # type: ignore[misc]
    assert finisher.drain(5.0)
    assert ran == list(range(100))
