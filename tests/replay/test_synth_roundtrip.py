"""Synthesised responses read back through our own codecs as the recorded ones did.

Real SDK calls against the stand-in are recorded into spans (and their exact response bytes);
each span's attributes are synthesised back into a response, which the endpoint's codec must
read as it read the recorded bytes: the same output messages, finish reasons, response id and
model, and token counts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
import pytest

from examples.standin import StandIn
from otel_replay.codecs import CODECS, Codec
from otel_replay.codecs._sse import parse_sse
from otel_replay.replay._synth import synthesize
from otel_replay.runs._handoff import handoff
from otel_replay.step import Step
from otel_replay.testing import CaptureKit

KEY = "sk-synth-test"
ORDER_TOOL = {
    "name": "lookup_order",
    "description": "Look up an order by id.",
    "parameters": {
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    },
}
PROMPTS = {"tool": "Where is my order A-1234?", "text": "Hello there!"}
CODEC = {codec.name: codec for codec in CODECS}


@dataclass(frozen=True)
class Recording:
    attributes: dict[str, Any]  # as exported: content attributes are JSON strings
    fixture: Step


def _call(standin: StandIn, endpoint: str, prompt: str, stream: bool) -> None:
    if endpoint == "anthropic.messages":
        with anthropic.Anthropic(base_url=standin.anthropic_base_url, api_key=KEY) as client:
            tool = {
                "name": ORDER_TOOL["name"],
                "description": ORDER_TOOL["description"],
                "input_schema": ORDER_TOOL["parameters"],
            }
            result: Any = client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=300,
                messages=[{"role": "user", "content": prompt}],
                tools=[tool],
                stream=stream,
            )
            if stream:
                list(result)
        return
    with openai.OpenAI(base_url=standin.openai_base_url, api_key=KEY) as client:
        if endpoint == "openai.responses":
            result = client.responses.create(
                model="gpt-4.1-mini",
                instructions="You are a support agent.",
                input=prompt,
                tools=[{"type": "function", **ORDER_TOOL}],
                stream=stream,
            )
        else:
            extra: dict[str, Any] = {"stream_options": {"include_usage": True}} if stream else {}
            result = client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": prompt}],
                tools=[{"type": "function", "function": ORDER_TOOL}],
                stream=stream,
                **extra,
            )
        if stream:
            list(result)


def record(standin: StandIn, endpoint: str, prompt: str, stream: bool) -> Recording:
    consumer = handoff().attach()
    try:
        with CaptureKit() as kit:
            _call(standin, endpoint, prompt, stream)
            (span,) = kit.raw_spans()
        assert span.context is not None
        fixture = consumer.steps()[span.context.span_id]
    finally:
        handoff().detach(consumer)
    return Recording(dict(span.attributes or {}), fixture)


@pytest.fixture(scope="module")
def recordings() -> Iterator[dict[tuple[str, str, bool], Recording]]:
    """Every endpoint x answer kind x streaming, recorded once for the module."""
    with StandIn(event_delay=0) as standin:
        yield {
            (endpoint, kind, stream): record(standin, endpoint, prompt, stream)
            for endpoint in CODEC
            for kind, prompt in PROMPTS.items()
            for stream in (False, True)
        }


def plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("kind", list(PROMPTS))
@pytest.mark.parametrize("endpoint", list(CODEC))
def test_codec_reads_the_synthesised_response_as_the_recorded_one(
    recordings: dict[tuple[str, str, bool], Recording], endpoint: str, kind: str, stream: bool
) -> None:
    recording = recordings[endpoint, kind, stream]
    attrs = recording.attributes
    codec: Codec = CODEC[endpoint]
    recorded = codec.parse_response(200, recording.fixture.response_body, stream)
    if kind == "tool":
        assert any(part["type"] == "tool_call" for part in recorded.output_messages[0]["parts"]), (
            "the stand-in was expected to call the tool"
        )

    made = synthesize(endpoint, attrs, stream)
    again = codec.parse_response(made.status_code, made.body, stream)

    assert again.output_messages == recorded.output_messages
    assert again.output_messages == json.loads(attrs["gen_ai.output.messages"])
    assert again.attributes == recorded.attributes
    for key, value in again.attributes.items():
        assert plain(attrs[key]) == value, key
    assert again.finished and again.error_type is None
    assert made.status_code == 200


@pytest.mark.parametrize("endpoint", list(CODEC))
def test_stream_chunks_are_one_event_each_spread_over_the_span(
    recordings: dict[tuple[str, str, bool], Recording], endpoint: str
) -> None:
    recording = recordings[endpoint, "tool", True]
    attrs = recording.attributes
    duration = recording.fixture.end_ns - recording.fixture.start_ns
    made = synthesize(endpoint, attrs, True, duration_ns=duration)

    assert dict(made.headers)["content-type"].startswith("text/event-stream")
    sizes = [size for size, _ in made.chunks]
    times = [at for _, at in made.chunks]
    assert sum(sizes) == len(made.body)
    assert len(made.chunks) == len(list(parse_sse(made.body)))
    offset = 0
    for size in sizes:  # every chunk is exactly one whole event
        assert len(list(parse_sse(made.body[offset : offset + size]))) == 1
        offset += size
    first = round(attrs["gen_ai.response.time_to_first_chunk"] * 1e9)
    assert times[0] == first and times[-1] == max(first, duration)
    assert times == sorted(times)


@pytest.mark.parametrize("endpoint", list(CODEC))
def test_json_body_is_one_chunk(
    recordings: dict[tuple[str, str, bool], Recording], endpoint: str
) -> None:
    attrs = recordings[endpoint, "text", False].attributes
    made = synthesize(endpoint, attrs, False)
    assert dict(made.headers)["content-type"] == "application/json"
    assert made.chunks == ()
    timed = synthesize(endpoint, attrs, False, duration_ns=5_000)
    assert timed.chunks == ((len(made.body), 5_000),)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("endpoint", list(CODEC))
def test_same_attributes_give_the_same_bytes(
    recordings: dict[tuple[str, str, bool], Recording], endpoint: str, stream: bool
) -> None:
    attrs = recordings[endpoint, "tool", stream].attributes
    decoded = {
        key: json.loads(value) if key.startswith("gen_ai.output") else value
        for key, value in attrs.items()
    }
    first = synthesize(endpoint, attrs, stream, duration_ns=1_000_000)
    assert synthesize(endpoint, dict(attrs), stream, duration_ns=1_000_000) == first
    # Content already decoded (as some sources give it) makes no difference either.
    assert synthesize(endpoint, decoded, stream, duration_ns=1_000_000) == first


RICH = [
    {
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "content": "The user wants two orders."},
            {"type": "text", "content": "Checking both orders, ünïcode and all."},
            {"type": "tool_call", "id": "call_a", "name": "lookup_order", "arguments": {"id": 1}},
            {"type": "tool_call", "id": "call_b", "name": "lookup_order", "arguments": {"id": 2}},
        ],
        "finish_reason": "tool_call",
    }
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("endpoint", list(CODEC))
def test_reasoning_text_and_parallel_tool_calls_round_trip(endpoint: str, stream: bool) -> None:
    attrs = {"gen_ai.request.model": "m", "gen_ai.output.messages": json.dumps(RICH)}
    made = synthesize(endpoint, attrs, stream)
    again = CODEC[endpoint].parse_response(200, made.body, stream)
    assert again.output_messages == RICH
    assert again.finished


def test_chat_choices_round_trip() -> None:
    """Several output messages are several choices, each with its own finish reason."""
    output = [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "One"}],
            "finish_reason": "stop",
        },
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Tw"}, {"type": "refusal", "content": "No."}],
            "finish_reason": "length",
        },
    ]
    attrs = {
        "gen_ai.output.messages": json.dumps(output),
        "gen_ai.response.finish_reasons": ["stop", "length"],
    }
    for stream in (False, True):
        made = synthesize("openai.chat_completions", attrs, stream)
        again = CODEC["openai.chat_completions"].parse_response(200, made.body, stream)
        assert again.output_messages == output
        assert again.attributes["gen_ai.response.finish_reasons"] == ["stop", "length"]
