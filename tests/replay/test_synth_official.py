"""Spans from the official OpenTelemetry openai instrumentation replay semantically.

The official instrumentation (opentelemetry-instrumentation-openai-v2) records a real SDK call
against the stand-in with content on the span; otel-replay is not involved in the recording.
Its attributes, synthesised and read back by our codec, give its answer back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from opentelemetry.instrumentation._semconv import _OpenTelemetrySemanticConventionStability
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from examples.standin import StandIn
from otel_replay.codecs.openai_chat import OPENAI_CHAT
from otel_replay.replay.synth import synthesize

TOOL = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Look up an order by id.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
}


@pytest.fixture
def official(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The official instrumentation on the latest GenAI conventions, content on spans."""
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    stability = _OpenTelemetrySemanticConventionStability
    saved = (stability._initialized, dict(stability._OTEL_SEMCONV_STABILITY_SIGNAL_MAPPING))
    stability._initialized = False  # the opt-in is read once per process
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield exporter
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
        stability._initialized = saved[0]
        stability._OTEL_SEMCONV_STABILITY_SIGNAL_MAPPING = saved[1]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_official_chat_span_with_a_tool_call_replays(
    standin: StandIn, official: InMemorySpanExporter, stream: bool
) -> None:
    extra: dict[str, Any] = {"stream_options": {"include_usage": True}} if stream else {}
    with openai.OpenAI(base_url=standin.openai_base_url, api_key="sk-official") as client:
        result = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Where is my order A-1234?"}],
            tools=[TOOL],
            seed=3,
            stream=stream,
            **extra,
        )
        if stream:
            list(result)
    (span,) = official.get_finished_spans()
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name != "otel_replay"
    attrs = dict(span.attributes or {})
    assert not any(key.startswith("replay.") for key in attrs)
    (recorded,) = json.loads(attrs["gen_ai.output.messages"])
    (call,) = [part for part in recorded["parts"] if part["type"] == "tool_call"]
    assert call["arguments"] == {"order_id": "A-1234"}

    made = synthesize("openai.chat_completions", attrs, stream)
    again = OPENAI_CHAT.parse_response(made.status_code, made.body, stream)

    (message,) = again.output_messages
    # The instrumentation keeps a stream's empty opening text; our codec reads the answer as it
    # reads it unstreamed: the call alone.
    assert message["parts"] == [p for p in recorded["parts"] if p.get("content") != ""]
    assert message["finish_reason"] == "tool_call"  # the schema's word for "tool_calls"
    got = again.attributes
    assert got["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert got["gen_ai.response.id"] == attrs["gen_ai.response.id"]
    assert got["gen_ai.response.model"] == attrs["gen_ai.response.model"]
    for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
        assert got[key] == attrs[key] > 0
    assert got["openai.response.service_tier"] == attrs["openai.response.service_tier"]
