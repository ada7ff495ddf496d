"""The Anthropic Messages codec, fed with request bodies the real SDK writes and realistic
response bodies (each one also read back by the SDK, so the fixtures stay honest)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx2
import pytest

from otel_replay.codecs import LlmRequest, LlmResponse
from otel_replay.codecs.anthropic_messages import ANTHROPIC_MESSAGES
from otel_replay.errors import CodecError

MODEL = "claude-sonnet-4-6"
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9aw"
    "AAAABJRU5ErkJggg=="
)
PDF = "JVBERi0xLjQKJcOkw7zDtsOfCjIgMCBvYmoKPDwvTGVuZ3RoIDMgMCBSPj4Kc3RyZWFtCg=="


class Recorder:
    """An httpx2 transport that answers every request with one canned response."""

    def __init__(self, response: httpx2.Response) -> None:
        self.response = response
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return self.response

    @property
    def body(self) -> dict[str, Any]:
        (request,) = self.requests
        decoded: dict[str, Any] = json.loads(request.content)
        return decoded

    @property
    def path(self) -> str:
        (request,) = self.requests
        return request.url.path


@contextmanager
def sdk(response: httpx2.Response) -> Iterator[tuple[anthropic.Anthropic, Recorder]]:
    recorder = Recorder(response)
    with (
        httpx2.Client(transport=httpx2.MockTransport(recorder)) as http_client,
        anthropic.Anthropic(
            api_key="sk-ant-test", http_client=http_client, max_retries=0
        ) as client,
    ):
        yield client, recorder


def sse(*events: dict[str, Any]) -> bytes:
    """An event stream as the API writes it: ``event:`` named after ``type``, then ``data:``."""
    return b"".join(
        f"event: {event['type']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n".encode()
        for event in events
    )


def sse_response(body: bytes) -> httpx2.Response:
    return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})


def json_response(status: int, body: dict[str, Any]) -> httpx2.Response:
    return httpx2.Response(status, content=json.dumps(body).encode(), headers={"request-id": "r"})


def usage(**counts: int | None) -> dict[str, Any]:
    base: dict[str, Any] = {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_creation_input_tokens": None,
        "cache_read_input_tokens": None,
        "server_tool_use": None,
        "service_tier": "standard",
    }
    base.update(counts)
    return base


def message(
    content: list[dict[str, Any]], stop_reason: str | None, **counts: int
) -> dict[str, Any]:
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage(**counts),
    }


SIMPLE_REPLY = message(
    [{"type": "text", "text": "Hi!"}], "end_turn", input_tokens=9, output_tokens=3
)


# -- matches ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        ("/v1/messages", {"model": MODEL, "max_tokens": 5, "messages": []}, True),
        ("/v1/messages/", {"max_tokens": 5, "messages": []}, True),
        ("/proxy/anthropic/v1/messages?beta=true", {"max_tokens": 5, "messages": []}, True),
        ("/v1/messages", {"model": MODEL, "messages": []}, True),
        ("/v1/messages/batches", {"max_tokens": 5, "messages": []}, False),
        ("/v1/messages/count_tokens", {"model": MODEL, "messages": []}, False),
        ("/v1/chat/completions", {"model": MODEL, "max_tokens": 5, "messages": []}, False),
        ("/v1/threads/thread_1/messages", {"role": "user", "content": "hi"}, False),
        ("/v1/messages", {"model": MODEL, "messages": "hi", "max_tokens": 5}, False),
        ("/v1/messages", {"model": MODEL, "messages": [], "response_format": {}}, False),
        ("/v1/messages", {"messages": []}, False),
    ],
)
def test_matches_by_path_and_body_shape(path: str, body: dict[str, Any], expected: bool) -> None:
    assert ANTHROPIC_MESSAGES.matches(path, body) is expected


def test_name() -> None:
    assert ANTHROPIC_MESSAGES.name == "anthropic.messages"


# -- requests written by the SDK -------------------------------------------------------------


def test_request_with_every_kind_of_content() -> None:
    with sdk(json_response(200, SIMPLE_REPLY)) as (client, recorder):
        client.messages.create(
            model=MODEL,
            max_tokens=1024,
            system=[
                {
                    "type": "text",
                    "text": "You are a weather bot.",
                    "cache_control": {"type": "ephemeral"},
                },
                {"type": "text", "text": "Answer briefly."},
            ],
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "text",
                            "text": "Weather in Paris? Here is the sky and a forecast.",
                        },
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                        },
                        {
                            "type": "image",
                            "source": {"type": "url", "url": "https://example.com/sky.jpg"},
                        },
                        {"type": "image", "source": {"type": "file", "file_id": "file_011CNha"}},
                        {
                            "type": "document",
                            "title": "Forecast",
                            "source": {
                                "type": "base64",
                                "media_type": "application/pdf",
                                "data": PDF,
                            },
                        },
                        {
                            "type": "document",
                            "source": {"type": "url", "url": "https://example.com/forecast.pdf"},
                        },
                        {"type": "document", "source": {"type": "file", "file_id": "file_011CPdf"}},
                        {
                            "type": "document",
                            "source": {
                                "type": "text",
                                "media_type": "text/plain",
                                "data": "Sunny.",
                            },
                        },
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "thinking",
                            "thinking": "Two tools are needed.",
                            "signature": "EqQBCkYIBRgCKkCsig==",
                        },
                        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"},
                        {"type": "text", "text": "Let me check."},
                        {
                            "type": "tool_use",
                            "id": "toolu_01A09q90qw90lq917835lq9",
                            "name": "get_weather",
                            "input": {"location": "Paris, FR", "unit": "celsius"},
                        },
                        {
                            "type": "tool_use",
                            "id": "toolu_01B",
                            "name": "get_radar",
                            "input": {},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
                            "content": "rainy, 12°C",
                        },
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_01B",
                            "is_error": True,
                            "content": [
                                {"type": "text", "text": "radar offline, last image:"},
                                {
                                    "type": "image",
                                    "source": {
                                        "type": "base64",
                                        "media_type": "image/png",
                                        "data": PNG,
                                    },
                                },
                            ],
                        },
                        {"type": "text", "text": "Summarise please."},
                    ],
                },
            ],
            tools=[
                {
                    "name": "get_weather",
                    "description": "Current weather for a city.",
                    "input_schema": {
                        "type": "object",
                        "properties": {
                            "location": {"type": "string"},
                            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                        },
                        "required": ["location"],
                    },
                },
                {
                    "type": "custom",
                    "name": "get_radar",
                    "input_schema": {"type": "object", "properties": {}},
                },
                {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
            ],
            stop_sequences=["\n\nHuman:"],
            metadata={"user_id": "user-1234"},
            output_config={
                "effort": "high",
                "format": {"type": "json_schema", "schema": {"type": "object"}},
            },
            tool_choice={"type": "auto"},
            extra_body={"temperature": 1, "top_p": 0.95, "top_k": 40},
        )
    assert recorder.path == "/v1/messages"
    assert ANTHROPIC_MESSAGES.matches(recorder.path, recorder.body)

    request = ANTHROPIC_MESSAGES.parse_request(recorder.path, recorder.body)

    assert request == LlmRequest(
        operation="chat",
        provider="anthropic",
        model=MODEL,
        stream=False,
        attributes={
            "gen_ai.request.model": MODEL,
            "gen_ai.request.max_tokens": 1024,
            "gen_ai.request.temperature": 1.0,
            "gen_ai.request.top_p": 0.95,
            "gen_ai.request.top_k": 40,
            "gen_ai.request.stop_sequences": ["\n\nHuman:"],
            "gen_ai.request.reasoning.level": "high",
            "gen_ai.output.type": "json",
        },
        system_instructions=[
            {"type": "text", "content": "You are a weather bot."},
            {"type": "text", "content": "Answer briefly."},
        ],
        input_messages=[
            {
                "role": "user",
                "parts": [
                    {
                        "type": "text",
                        "content": "Weather in Paris? Here is the sky and a forecast.",
                    },
                    {"type": "blob", "modality": "image", "mime_type": "image/png", "content": PNG},
                    {"type": "uri", "modality": "image", "uri": "https://example.com/sky.jpg"},
                    {"type": "file", "modality": "image", "file_id": "file_011CNha"},
                    {
                        "type": "blob",
                        "modality": "document",
                        "mime_type": "application/pdf",
                        "content": PDF,
                    },
                    {
                        "type": "uri",
                        "modality": "document",
                        "uri": "https://example.com/forecast.pdf",
                    },
                    {"type": "file", "modality": "document", "file_id": "file_011CPdf"},
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": "Sunny."},
                    },
                ],
            },
            {
                "role": "assistant",
                "parts": [
                    {"type": "reasoning", "content": "Two tools are needed."},
                    {"type": "reasoning", "content": "", "redacted": True},
                    {"type": "text", "content": "Let me check."},
                    {
                        "type": "tool_call",
                        "id": "toolu_01A09q90qw90lq917835lq9",
                        "name": "get_weather",
                        "arguments": {"location": "Paris, FR", "unit": "celsius"},
                    },
                    {"type": "tool_call", "id": "toolu_01B", "name": "get_radar", "arguments": {}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "type": "tool_call_response",
                        "id": "toolu_01A09q90qw90lq917835lq9",
                        "response": "rainy, 12°C",
                    },
                    {
                        "type": "tool_call_response",
                        "id": "toolu_01B",
                        "response": [
                            {"type": "text", "content": "radar offline, last image:"},
                            {
                                "type": "blob",
                                "modality": "image",
                                "mime_type": "image/png",
                                "content": PNG,
                            },
                        ],
                        "is_error": True,
                    },
                    {"type": "text", "content": "Summarise please."},
                ],
            },
        ],
        tool_definitions=[
            {
                "type": "function",
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "location": {"type": "string"},
                        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    },
                    "required": ["location"],
                },
            },
            {
                "type": "function",
                "name": "get_radar",
                "parameters": {"type": "object", "properties": {}},
            },
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
        ],
    )


def test_streaming_request_with_a_plain_string_system_prompt() -> None:
    with sdk(sse_response(sse(*TEXT_STREAM))) as (client, recorder):
        stream = client.messages.create(
            model=MODEL,
            max_tokens=256,
            system="Be terse.",
            messages=[
                {"role": "user", "content": "Hello"},
                {"role": "assistant", "content": "Hi."},
                {"role": "user", "content": "Say more."},
            ],
            stream=True,
        )
        with stream:
            for _ in stream:
                pass

    request = ANTHROPIC_MESSAGES.parse_request(recorder.path, recorder.body)

    assert request == LlmRequest(
        operation="chat",
        provider="anthropic",
        model=MODEL,
        stream=True,
        attributes={
            "gen_ai.request.model": MODEL,
            "gen_ai.request.max_tokens": 256,
            "gen_ai.request.stream": True,
        },
        system_instructions=[{"type": "text", "content": "Be terse."}],
        input_messages=[
            {"role": "user", "parts": [{"type": "text", "content": "Hello"}]},
            {"role": "assistant", "parts": [{"type": "text", "content": "Hi."}]},
            {"role": "user", "parts": [{"type": "text", "content": "Say more."}]},
        ],
        tool_definitions=[],
    )


def test_request_with_odd_fields_never_raises() -> None:
    body = {
        "model": 7,
        "max_tokens": True,
        "temperature": "hot",
        "top_k": 2.5,
        "stop_sequences": ["ok", 3],
        "system": [{"type": "text", "text": "S"}, {"no_type": 1}],
        "messages": [
            "not a message",
            {"content": [{"type": "mystery_block", "payload": [1, 2]}, 42, {"type": ["x"]}]},
            {"role": "user", "content": None},
        ],
        "tools": [{"type": "custom", "name": "t"}, "junk"],
        "output_config": {"effort": None},
    }

    request = ANTHROPIC_MESSAGES.parse_request("/v1/messages", body)

    assert request == LlmRequest(
        operation="chat",
        provider="anthropic",
        model=None,
        stream=False,
        attributes={},
        system_instructions=[
            {"type": "text", "content": "S"},
            {"type": "unknown", "no_type": 1},
        ],
        input_messages=[
            {
                "role": "user",
                "parts": [
                    {"type": "mystery_block", "payload": [1, 2]},
                    {"type": "unknown"},
                ],
            },
            {"role": "user", "parts": []},
        ],
        tool_definitions=[{"type": "function", "name": "t"}],
    )


# -- non-streamed responses ------------------------------------------------------------------


def read_back(response_body: dict[str, Any]) -> anthropic.types.Message:
    """The SDK's own reading of a response body, proving the fixture is realistic."""
    with sdk(json_response(200, response_body)) as (client, _):
        return client.messages.create(
            model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        )


def test_text_response_with_cache_tokens() -> None:
    body = message(
        [{"type": "text", "text": "It is rainy in Paris.", "citations": None}],
        "end_turn",
        input_tokens=21,
        output_tokens=12,
        cache_creation_input_tokens=1500,
        cache_read_input_tokens=3000,
    )
    assert read_back(body).usage.cache_read_input_tokens == 3000

    response = ANTHROPIC_MESSAGES.parse_response(200, json.dumps(body).encode(), streamed=False)

    assert response == LlmResponse(
        attributes={
            "gen_ai.response.id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "gen_ai.response.model": "claude-sonnet-4-6",
            "gen_ai.response.finish_reasons": ["end_turn"],
            "gen_ai.usage.input_tokens": 4521,
            "gen_ai.usage.output_tokens": 12,
            "gen_ai.usage.cache_read.input_tokens": 3000,
            "gen_ai.usage.cache_creation.input_tokens": 1500,
        },
        output_messages=[
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "It is rainy in Paris."}],
                "finish_reason": "stop",
            }
        ],
        error_type=None,
    )


def test_tool_use_response_with_thinking() -> None:
    body = message(
        [
            {"type": "thinking", "thinking": "I should call the tool.", "signature": "EqQBCkYI"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
            {"type": "text", "text": "Checking.", "citations": None},
            {
                "type": "tool_use",
                "id": "toolu_01A09q90qw90lq917835lq9",
                "name": "get_weather",
                "input": {"location": "Paris, FR"},
                "caller": {"type": "direct"},
            },
        ],
        "tool_use",
        input_tokens=400,
        output_tokens=95,
    )
    body["usage"]["output_tokens_details"] = {"thinking_tokens": 60}
    assert read_back(body).stop_reason == "tool_use"

    response = ANTHROPIC_MESSAGES.parse_response(200, json.dumps(body).encode(), streamed=False)

    assert response == LlmResponse(
        attributes={
            "gen_ai.response.id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "gen_ai.response.model": "claude-sonnet-4-6",
            "gen_ai.response.finish_reasons": ["tool_use"],
            "gen_ai.usage.input_tokens": 400,
            "gen_ai.usage.output_tokens": 95,
            "gen_ai.usage.reasoning.output_tokens": 60,
        },
        output_messages=[
            {
                "role": "assistant",
                "parts": [
                    {"type": "reasoning", "content": "I should call the tool."},
                    {"type": "reasoning", "content": "", "redacted": True},
                    {"type": "text", "content": "Checking."},
                    {
                        "type": "tool_call",
                        "id": "toolu_01A09q90qw90lq917835lq9",
                        "name": "get_weather",
                        "arguments": {"location": "Paris, FR"},
                    },
                ],
                "finish_reason": "tool_call",
            }
        ],
    )


def test_server_tool_response() -> None:
    results = [
        {
            "type": "web_search_result",
            "title": "Paris weather",
            "url": "https://example.com/paris",
            "encrypted_content": "EqgfCioIARgBIiQ3",
            "page_age": "April 30, 2025",
        }
    ]
    body = message(
        [
            {
                "type": "server_tool_use",
                "id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
                "name": "web_search",
                "input": {"query": "weather paris"},
            },
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
                "content": results,
            },
            {"type": "text", "text": "Rain.", "citations": None},
        ],
        "end_turn",
        input_tokens=50,
        output_tokens=20,
    )
    assert read_back(body).content[1].type == "web_search_tool_result"

    response = ANTHROPIC_MESSAGES.parse_response(200, json.dumps(body).encode(), streamed=False)

    assert response.output_messages == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "server_tool_call",
                    "id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
                    "name": "web_search",
                    "server_tool_call": {"type": "web_search", "input": {"query": "weather paris"}},
                },
                {
                    "type": "server_tool_call_response",
                    "id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
                    "server_tool_call_response": {
                        "type": "web_search_tool_result",
                        "content": results,
                    },
                },
                {"type": "text", "content": "Rain."},
            ],
            "finish_reason": "stop",
        }
    ]


RATE_LIMIT = {
    "type": "error",
    "error": {
        "type": "rate_limit_error",
        "message": "Number of request tokens has exceeded your limit.",
    },
    "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
}


def test_rate_limit_error_body() -> None:
    with (
        sdk(json_response(429, RATE_LIMIT)) as (client, _),
        pytest.raises(anthropic.RateLimitError),
    ):
        client.messages.create(
            model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x"}]
        )

    response = ANTHROPIC_MESSAGES.parse_response(
        429, json.dumps(RATE_LIMIT).encode(), streamed=False
    )

    assert response == LlmResponse(attributes={}, output_messages=[], error_type="rate_limit_error")


def test_error_body_for_a_streamed_request_is_json() -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}

    response = ANTHROPIC_MESSAGES.parse_response(
        529, json.dumps(overloaded).encode(), streamed=True
    )

    assert response == LlmResponse(error_type="overloaded_error")


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (502, b"<html><body>Bad gateway</body></html>"),
        (500, b""),
        (404, b'{"detail": "Not Found"}'),
        (400, b"[1, 2]"),
    ],
)
def test_error_bodies_that_are_not_anthropic_errors_give_an_empty_response(
    status: int, body: bytes
) -> None:
    assert ANTHROPIC_MESSAGES.parse_response(status, body, streamed=False) == LlmResponse()


@pytest.mark.parametrize("body", [b"<html>ok</html>", b"", b"[]", b'"message"', b"\xff\xfe"])
def test_success_body_that_is_not_a_json_object_raises(body: bytes) -> None:
    with pytest.raises(CodecError, match="HTTP 200"):
        ANTHROPIC_MESSAGES.parse_response(200, body, streamed=False)


def test_message_with_missing_fields_never_raises() -> None:
    response = ANTHROPIC_MESSAGES.parse_response(200, b'{"content": "odd"}', streamed=False)

    assert response == LlmResponse(
        attributes={"gen_ai.response.finish_reasons": ["error"]},
        output_messages=[
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "odd"}],
                "finish_reason": "error",
            }
        ],
    )


# -- streams ---------------------------------------------------------------------------------


def message_start(**counts: int) -> dict[str, Any]:
    started = message([], None, **counts)
    return {"type": "message_start", "message": started}


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, **fields: str) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": fields}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str, **counts: int) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": counts,
    }


PING = {"type": "ping"}
MESSAGE_STOP = {"type": "message_stop"}

TEXT_STREAM = [
    message_start(input_tokens=25, output_tokens=1),
    block_start(0, {"type": "text", "text": ""}),
    PING,
    delta(0, type="text_delta", text="Hello"),
    delta(0, type="text_delta", text=", world"),
    block_stop(0),
    message_delta("end_turn", output_tokens=15),
    MESSAGE_STOP,
]

# Thinking, text, then a tool call whose arguments arrive cut mid-token, with cache usage.
TOOL_STREAM = [
    message_start(
        input_tokens=472,
        output_tokens=2,
        cache_creation_input_tokens=0,
        cache_read_input_tokens=2048,
    ),
    block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
    delta(0, type="thinking_delta", thinking="The user wants the weather, "),
    delta(0, type="thinking_delta", thinking="so I call get_weather."),
    delta(0, type="signature_delta", signature="EqQBCkYIBRgCKkCsig=="),
    block_stop(0),
    block_start(1, {"type": "text", "text": ""}),
    delta(1, type="text_delta", text="Okay, let me check."),
    block_stop(1),
    block_start(
        2,
        {
            "type": "tool_use",
            "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "name": "get_weather",
            "input": {},
        },
    ),
    delta(2, type="input_json_delta", partial_json=""),
    delta(2, type="input_json_delta", partial_json='{"loc'),
    delta(2, type="input_json_delta", partial_json='ation": "San Fra'),
    delta(2, type="input_json_delta", partial_json='ncisco, CA", "unit": "fahr'),
    delta(2, type="input_json_delta", partial_json='enheit"}'),
    block_stop(2),
    PING,
    message_delta("tool_use", output_tokens=89),
    MESSAGE_STOP,
]


def stream_back(events: list[dict[str, Any]]) -> anthropic.types.Message:
    """The SDK's own reading of a complete stream, proving the fixture is realistic."""
    with (
        sdk(sse_response(sse(*events))) as (client, _),
        client.messages.stream(
            model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        ) as stream,
    ):
        return stream.get_final_message()


def test_text_stream() -> None:
    assert stream_back(TEXT_STREAM).content[0].type == "text"

    response = ANTHROPIC_MESSAGES.parse_response(200, sse(*TEXT_STREAM), streamed=True)

    assert response == LlmResponse(
        attributes={
            "gen_ai.response.id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "gen_ai.response.model": "claude-sonnet-4-6",
            "gen_ai.response.finish_reasons": ["end_turn"],
            "gen_ai.usage.input_tokens": 25,
            "gen_ai.usage.output_tokens": 15,
        },
        output_messages=[
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "Hello, world"}],
                "finish_reason": "stop",
            }
        ],
    )


def test_stream_with_thinking_and_a_tool_call_split_mid_token() -> None:
    final = stream_back(TOOL_STREAM)
    assert final.content[2].type == "tool_use"
    assert final.content[2].input == {"location": "San Francisco, CA", "unit": "fahrenheit"}

    response = ANTHROPIC_MESSAGES.parse_response(200, sse(*TOOL_STREAM), streamed=True)

    assert response == LlmResponse(
        attributes={
            "gen_ai.response.id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "gen_ai.response.model": "claude-sonnet-4-6",
            "gen_ai.response.finish_reasons": ["tool_use"],
            "gen_ai.usage.input_tokens": 2520,
            "gen_ai.usage.output_tokens": 89,
            "gen_ai.usage.cache_read.input_tokens": 2048,
            "gen_ai.usage.cache_creation.input_tokens": 0,
        },
        output_messages=[
            {
                "role": "assistant",
                "parts": [
                    {
                        "type": "reasoning",
                        "content": "The user wants the weather, so I call get_weather.",
                    },
                    {"type": "text", "content": "Okay, let me check."},
                    {
                        "type": "tool_call",
                        "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                        "name": "get_weather",
                        "arguments": {"location": "San Francisco, CA", "unit": "fahrenheit"},
                    },
                ],
                "finish_reason": "tool_call",
            }
        ],
    )


def test_stream_with_crlf_line_endings() -> None:
    body = sse(*TEXT_STREAM).replace(b"\n", b"\r\n")

    response = ANTHROPIC_MESSAGES.parse_response(200, body, streamed=True)

    assert response == ANTHROPIC_MESSAGES.parse_response(200, sse(*TEXT_STREAM), streamed=True)


def test_cumulative_usage_on_message_delta_overrides_message_start() -> None:
    events = [
        message_start(input_tokens=10, output_tokens=1, cache_read_input_tokens=5),
        block_start(0, {"type": "text", "text": ""}),
        delta(0, type="text_delta", text="ok"),
        block_stop(0),
        message_delta("end_turn", input_tokens=12, output_tokens=7, cache_read_input_tokens=6),
        MESSAGE_STOP,
    ]
    assert stream_back(events).usage.input_tokens == 12

    response = ANTHROPIC_MESSAGES.parse_response(200, sse(*events), streamed=True)

    assert response.attributes == {
        "gen_ai.response.id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "gen_ai.response.model": "claude-sonnet-4-6",
        "gen_ai.response.finish_reasons": ["end_turn"],
        "gen_ai.usage.input_tokens": 18,
        "gen_ai.usage.output_tokens": 7,
        "gen_ai.usage.cache_read.input_tokens": 6,
    }


def test_stream_cut_before_message_stop_keeps_what_arrived() -> None:
    # The connection dropped inside the tool arguments, mid-event.
    body = sse(*TOOL_STREAM[:13]) + b'event: content_block_delta\ndata: {"type":"content_bl'

    response = ANTHROPIC_MESSAGES.parse_response(200, body, streamed=True)

    assert response == LlmResponse(
        attributes={
            "gen_ai.response.id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "gen_ai.response.model": "claude-sonnet-4-6",
            "gen_ai.response.finish_reasons": ["error"],
            "gen_ai.usage.input_tokens": 2520,
            "gen_ai.usage.output_tokens": 2,
            "gen_ai.usage.cache_read.input_tokens": 2048,
            "gen_ai.usage.cache_creation.input_tokens": 0,
        },
        output_messages=[
            {
                "role": "assistant",
                "parts": [
                    {
                        "type": "reasoning",
                        "content": "The user wants the weather, so I call get_weather.",
                    },
                    {"type": "text", "content": "Okay, let me check."},
                    {
                        "type": "tool_call",
                        "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                        "name": "get_weather",
                        "arguments": '{"location": "San Fra',
                    },
                ],
                "finish_reason": "error",
            }
        ],
        error_type=None,
        finished=False,
    )


def test_mid_stream_error_event() -> None:
    events = [
        *TEXT_STREAM[:4],
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ]
    with (
        sdk(sse_response(sse(*events))) as (client, _),
        pytest.raises(anthropic.APIStatusError, match="Overloaded"),
    ):
        for _ in client.messages.create(
            model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x"}], stream=True
        ):
            pass

    response = ANTHROPIC_MESSAGES.parse_response(200, sse(*events), streamed=True)

    assert response == LlmResponse(
        attributes={
            "gen_ai.response.id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "gen_ai.response.model": "claude-sonnet-4-6",
            "gen_ai.response.finish_reasons": ["error"],
            "gen_ai.usage.input_tokens": 25,
            "gen_ai.usage.output_tokens": 1,
        },
        output_messages=[
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "Hello"}],
                "finish_reason": "error",
            }
        ],
        error_type="overloaded_error",
        finished=False,
    )


def test_a_stream_read_up_to_its_stop_reason_arrived_whole() -> None:
    # LiteLLM closes an Anthropic stream once it has the stop reason: message_stop, which
    # carries nothing, is never read.
    cut_after_stop_reason = ANTHROPIC_MESSAGES.parse_response(
        200, sse(*TEXT_STREAM[:-1]), streamed=True
    )
    cut_mid_text = ANTHROPIC_MESSAGES.parse_response(200, sse(*TEXT_STREAM[:5]), streamed=True)

    assert cut_after_stop_reason.finished is True
    assert cut_after_stop_reason.attributes["gen_ai.response.finish_reasons"] == ["end_turn"]
    assert cut_after_stop_reason.output_messages == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Hello, world"}],
            "finish_reason": "stop",
        }
    ]
    assert cut_mid_text.finished is False
    assert cut_mid_text.attributes["gen_ai.response.finish_reasons"] == ["error"]


@pytest.mark.parametrize(
    "body", [b"", b": keep-alive\n\n", b"<html>502</html>", b"data: [DONE]\n\n"]
)
def test_stream_with_nothing_usable_never_raises(body: bytes) -> None:
    response = ANTHROPIC_MESSAGES.parse_response(200, body, streamed=True)

    assert response == LlmResponse(
        attributes={"gen_ai.response.finish_reasons": ["error"]}, finished=False
    )


def test_events_read_even_when_not_flagged_as_streamed() -> None:
    body = sse(*TEXT_STREAM)

    assert ANTHROPIC_MESSAGES.parse_response(200, body, streamed=False) == (
        ANTHROPIC_MESSAGES.parse_response(200, body, streamed=True)
    )


def test_unknown_events_blocks_and_deltas_are_tolerated() -> None:
    events = [
        message_start(input_tokens=3, output_tokens=1),
        block_start(0, {"type": "text", "text": "Pre"}),
        delta(0, type="citations_delta"),
        delta(0, type="text_delta", text="fix"),
        delta(7, type="text_delta", text="orphan"),
        {"type": "content_block_delta", "index": 0, "delta": "junk"},
        block_start(1, {"type": "compaction", "content": "Summary so far."}),
        delta(1, type="compaction_delta", content="ignored"),
        {"type": "brand_new_event", "stuff": 1},
        message_delta("end_turn", output_tokens=4),
        MESSAGE_STOP,
    ]

    response = ANTHROPIC_MESSAGES.parse_response(200, sse(*events), streamed=True)

    assert response.output_messages == [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "Prefix"},
                {"type": "compaction", "content": "Summary so far."},
            ],
            "finish_reason": "stop",
        }
    ]


@pytest.mark.parametrize(
    ("stop_reason", "message_finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "tool_call"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
        (None, "error"),
    ],
)
def test_finish_reasons(stop_reason: str | None, message_finish: str) -> None:
    body = message([], stop_reason, input_tokens=1, output_tokens=1)

    response = ANTHROPIC_MESSAGES.parse_response(200, json.dumps(body).encode(), streamed=False)

    assert response.attributes["gen_ai.response.finish_reasons"] == [stop_reason or "error"]
    assert response.output_messages[0]["finish_reason"] == message_finish


def test_streamed_tool_call_without_arguments_keeps_its_empty_input() -> None:
    events = [
        message_start(input_tokens=30, output_tokens=1),
        block_start(0, {"type": "tool_use", "id": "toolu_01R", "name": "get_radar", "input": {}}),
        delta(0, type="input_json_delta", partial_json=""),
        block_stop(0),
        message_delta("tool_use", output_tokens=12),
        MESSAGE_STOP,
    ]
    assert stream_back(events).content[0].input == {}

    response = ANTHROPIC_MESSAGES.parse_response(200, sse(*events), streamed=True)

    assert response.output_messages == [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "toolu_01R", "name": "get_radar", "arguments": {}}
            ],
            "finish_reason": "tool_call",
        }
    ]
