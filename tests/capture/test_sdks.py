"""The real openai and anthropic SDKs against the stand-in: spans, messages and hashes.

Each call's request hash must equal sha256 of the bytes the stand-in received, and its
response hash sha256 of the bytes the application received.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from examples.standin import StandIn
from otel_replay.runs import RUN_FACTS
from otel_replay.runs._handoff import Consumer, handoff
from otel_replay.step import Step
from otel_replay.testing import CaptureKit

KEY = "sk-test-secret-0123456789"
SYSTEM = "You are a support agent for Acme."
TOOLS_CHAT = [
    {
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
]
LOOKUP_DEFINITION = {
    "type": "function",
    "name": "lookup_order",
    "description": "Look up an order by id.",
    "parameters": TOOLS_CHAT[0]["function"]["parameters"],
}


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


_consumer: list[Consumer] = []


@pytest.fixture
def kit() -> Iterator[CaptureKit]:
    consumer = handoff().attach()
    _consumer[:] = [consumer]
    try:
        with CaptureKit() as capture:
            yield capture
    finally:
        handoff().detach(consumer)


def llm_steps(kit: CaptureKit) -> list[tuple[dict[str, Any], Step]]:
    out = []
    handed = _consumer[0].steps()
    for raw, span in zip(
        sorted(kit.raw_spans(), key=lambda s: s.start_time or 0), kit.spans(), strict=True
    ):
        assert raw.context is not None
        step = handed.get(raw.context.span_id)
        assert step is not None, f"no step for {span['name']}"
        out.append((span, step))
    return out


def assert_hashes(span: dict[str, Any], step: Step, received: bytes) -> None:
    attrs = span["attributes"]
    assert step.request_body == received
    assert attrs["replay.request.hash"] == sha(received)
    assert attrs["replay.request.size"] == len(received)
    assert attrs["replay.response.hash"] == sha(step.response_body)
    assert attrs["replay.response.complete"] is True
    assert KEY not in repr(span) and KEY.encode() not in step.request_body


def assert_facts(span: dict[str, Any], step: Step) -> None:
    """The step carries the facts its span does: the model call's and its run's."""
    attrs = span["attributes"]
    assert step.provider == attrs["gen_ai.provider.name"]
    assert step.model == attrs["gen_ai.request.model"]
    assert step.tokens_in == attrs.get("gen_ai.usage.input_tokens")
    assert step.tokens_out == attrs.get("gen_ai.usage.output_tokens")
    assert step.error_type == attrs.get("error.type")
    run = step.run
    assert run is not None and run.run_id == step.run_id == attrs["replay.run.id"]
    assert run.mode == attrs["replay.mode"]
    # The run's facts are on the run's own span, which the step's span names.
    assert not RUN_FACTS & attrs.keys()
    assert attrs["replay.run.span_id"]
    assert 0 < run.start_ns <= step.start_ns <= step.end_ns


def assert_common(span: dict[str, Any], standin: StandIn, provider: str, model: str) -> None:
    attrs = span["attributes"]
    assert span["name"] == f"chat {model}"
    assert span["kind"] == "CLIENT"
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == provider
    assert attrs["gen_ai.request.model"] == model
    assert attrs["server.address"] == "127.0.0.1"
    assert attrs["server.port"] == standin.port
    assert attrs["replay.step.kind"] == "llm"
    assert attrs["replay.prompt.hash"].startswith("sha256:")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_openai_chat(standin: StandIn, kit: CaptureKit, stream: bool, mode: str) -> None:
    params: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Where is my order A-1234?"},
        ],
        "tools": TOOLS_CHAT,
        "temperature": 0.5,
        "max_completion_tokens": 200,
        "seed": 11,
    }
    if stream:
        params |= {"stream": True, "stream_options": {"include_usage": True}}

    def sync_call() -> Any:
        with openai.OpenAI(base_url=standin.openai_base_url, api_key=KEY) as client:
            result = client.chat.completions.create(**params)
            if not stream:
                return result.choices[0].message.tool_calls
            calls: dict[int, dict[str, str]] = {}
            for chunk in result:
                for choice in chunk.choices:
                    for call in choice.delta.tool_calls or []:
                        entry = calls.setdefault(call.index, {"id": "", "args": ""})
                        entry["id"] = call.id or entry["id"]
                        entry["args"] += (call.function and call.function.arguments) or ""
            return calls

    async def async_call() -> Any:
        async with openai.AsyncOpenAI(base_url=standin.openai_base_url, api_key=KEY) as client:
            result = await client.chat.completions.create(**params)
            if not stream:
                return result.choices[0].message.tool_calls
            return [chunk async for chunk in result]

    answer = sync_call() if mode == "sync" else asyncio.run(async_call())
    assert answer
    ((span, step),) = llm_steps(kit)
    (received,) = standin.received
    assert_common(span, standin, "openai", "gpt-4o-mini")
    assert_hashes(span, step, received.body)
    assert_facts(span, step)
    attrs = span["attributes"]
    assert attrs["gen_ai.request.temperature"] == 0.5
    assert attrs["gen_ai.request.max_tokens"] == 200
    assert attrs["gen_ai.request.seed"] == 11
    # Chat history carries its system message: the conventions keep it in the input messages.
    assert "gen_ai.system_instructions" not in attrs
    assert attrs["gen_ai.input.messages"] == [
        {"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
        {"role": "user", "parts": [{"type": "text", "content": "Where is my order A-1234?"}]},
    ]
    assert attrs["gen_ai.tool.definitions"] == [LOOKUP_DEFINITION]
    assert attrs["replay.tool.schema.version"].startswith("sha256:")
    (output,) = attrs["gen_ai.output.messages"]
    (call,) = [part for part in output["parts"] if part["type"] == "tool_call"]
    assert call["name"] == "lookup_order"
    assert call["arguments"] == {"order_id": "A-1234"}
    assert attrs["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert attrs["gen_ai.response.id"].startswith("chatcmpl-")
    assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
    if stream:
        assert 0 < attrs["gen_ai.response.time_to_first_chunk"] < 5
        assert len(step.chunks) > 1
    else:
        assert "gen_ai.response.time_to_first_chunk" not in attrs


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_openai_responses(standin: StandIn, kit: CaptureKit, stream: bool, mode: str) -> None:
    params: dict[str, Any] = {
        "model": "gpt-4.1-mini",
        "instructions": SYSTEM,
        "input": "Hello there!",
        "max_output_tokens": 100,
        "stream": stream,
    }

    def sync_call() -> str:
        with openai.OpenAI(base_url=standin.openai_base_url, api_key=KEY) as client:
            result = client.responses.create(**params)
            if not stream:
                return str(result.output_text)
            return "".join(e.delta for e in result if e.type == "response.output_text.delta")

    async def async_call() -> str:
        async with openai.AsyncOpenAI(base_url=standin.openai_base_url, api_key=KEY) as client:
            result = await client.responses.create(**params)
            if not stream:
                return str(result.output_text)
            return "".join(
                [e.delta async for e in result if e.type == "response.output_text.delta"]
            )

    text = sync_call() if mode == "sync" else asyncio.run(async_call())
    ((span, step),) = llm_steps(kit)
    (received,) = standin.received
    assert_common(span, standin, "openai", "gpt-4.1-mini")
    assert_hashes(span, step, received.body)
    assert_facts(span, step)
    attrs = span["attributes"]
    assert attrs["gen_ai.request.max_tokens"] == 100
    assert attrs["gen_ai.system_instructions"] == [{"type": "text", "content": SYSTEM}]
    assert attrs["gen_ai.input.messages"] == [
        {"role": "user", "parts": [{"type": "text", "content": "Hello there!"}]}
    ]
    (output,) = attrs["gen_ai.output.messages"]
    assert output["role"] == "assistant"
    assert output["parts"] == [{"type": "text", "content": text}]
    assert attrs["gen_ai.response.id"].startswith("resp_")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_anthropic_messages(standin: StandIn, kit: CaptureKit, stream: bool, mode: str) -> None:
    params: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 300,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": "Where is my order A-1234?"}],
        "tools": [
            {
                "name": "lookup_order",
                "description": "Look up an order by id.",
                "input_schema": TOOLS_CHAT[0]["function"]["parameters"],
            }
        ],
    }

    def sync_call() -> Any:
        with anthropic.Anthropic(base_url=standin.anthropic_base_url, api_key=KEY) as client:
            if stream:
                with client.messages.stream(**params) as events:
                    return events.get_final_message()
            return client.messages.create(**params)

    async def async_call() -> Any:
        async with anthropic.AsyncAnthropic(
            base_url=standin.anthropic_base_url, api_key=KEY
        ) as client:
            if stream:
                async with client.messages.stream(**params) as events:
                    return await events.get_final_message()
            return await client.messages.create(**params)

    message = sync_call() if mode == "sync" else asyncio.run(async_call())
    ((span, step),) = llm_steps(kit)
    (received,) = standin.received
    assert_common(span, standin, "anthropic", "claude-sonnet-4-6")
    assert_hashes(span, step, received.body)
    assert_facts(span, step)
    attrs = span["attributes"]
    assert attrs["gen_ai.request.max_tokens"] == 300
    assert attrs["gen_ai.system_instructions"] == [{"type": "text", "content": SYSTEM}]
    assert attrs["gen_ai.tool.definitions"] == [LOOKUP_DEFINITION]
    (output,) = attrs["gen_ai.output.messages"]
    tool_use = next(b for b in message.content if b.type == "tool_use")
    assert {
        "type": "tool_call",
        "id": tool_use.id,
        "name": "lookup_order",
        "arguments": {"order_id": "A-1234"},
    } in output["parts"]
    assert attrs["gen_ai.response.id"] == message.id
    assert attrs["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert attrs["gen_ai.usage.output_tokens"] == message.usage.output_tokens


def test_provider_error_is_recorded_and_raised_unchanged(standin: StandIn, kit: CaptureKit) -> None:
    with (
        openai.OpenAI(base_url=standin.openai_base_url, api_key=KEY, max_retries=0) as client,
        pytest.raises(openai.RateLimitError),
    ):
        client.chat.completions.create(
            model="standin-error", messages=[{"role": "user", "content": "hi"}]
        )
    ((span, step),) = llm_steps(kit)
    assert span["status"] == "ERROR"
    assert span["attributes"]["error.type"] not in ("", None)
    assert_facts(span, step)
    assert step.tokens_in is None and step.status_code == 429


def test_stream_cut_mid_way_is_recorded_and_raised(standin: StandIn, kit: CaptureKit) -> None:
    with (
        openai.OpenAI(base_url=standin.openai_base_url, api_key=KEY, max_retries=0) as client,
        pytest.raises(Exception) as info,
    ):
        for _ in client.chat.completions.create(
            model="standin-cut", messages=[{"role": "user", "content": "hi"}], stream=True
        ):
            pass
    ((span, step),) = llm_steps(kit)
    attrs = span["attributes"]
    assert attrs["replay.response.complete"] is False
    cause = info.value.__cause__  # the SDK wraps the transport's exception
    assert cause is not None
    assert attrs["error.type"] == f"{type(cause).__module__}.{type(cause).__qualname__}"
    assert step.response_body and step.complete is False
    assert_facts(span, step)


def test_metrics_follow_the_conventions(standin: StandIn, kit: CaptureKit) -> None:
    with openai.OpenAI(base_url=standin.openai_base_url, api_key=KEY) as client:
        result = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}]
        )
    metrics = kit.metrics()
    (duration,) = metrics["gen_ai.client.operation.duration"]
    assert duration["count"] == 1
    assert duration["explicit_bounds"][:3] == [0.01, 0.02, 0.04]
    assert duration["attributes"]["gen_ai.operation.name"] == "chat"
    assert duration["attributes"]["gen_ai.request.model"] == "gpt-4o-mini"
    usage = {p["attributes"]["gen_ai.token.type"]: p for p in metrics["gen_ai.client.token.usage"]}
    assert result.usage is not None
    assert usage["input"]["sum"] == result.usage.prompt_tokens
    assert usage["output"]["sum"] == result.usage.completion_tokens
    assert usage["input"]["explicit_bounds"][:4] == [1, 4, 16, 64]
