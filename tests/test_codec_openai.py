"""OpenAI Chat Completions and Responses codecs: exact request/response bodies in, whole values out.

Request bodies are produced by the real SDK (captured from a mock transport); response bodies
are realistic JSON and SSE, and the SSE fixtures are cross-checked by feeding them to the SDK's
own stream accumulators.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import httpx2
import openai
import pytest

from otel_replay.codecs import LlmRequest, LlmResponse
from otel_replay.codecs.openai_chat import OPENAI_CHAT
from otel_replay.codecs.openai_responses import OPENAI_RESPONSES
from otel_replay.errors import CodecError

# --- helpers ------------------------------------------------------------------------------


def sse(chunks: Iterable[Any], *, done: bool = True) -> bytes:
    """A Chat Completions stream body: ``data:`` lines only, ``[DONE]`` at the end."""
    text = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks)
    return (text + ("data: [DONE]\n\n" if done else "")).encode()


def named_sse(events: Iterable[dict[str, Any]], *, names: bool = True) -> bytes:
    """A Responses stream body: each event named by its ``type``, as OpenAI sends it."""
    out = []
    for event in events:
        head = f"event: {event['type']}\n" if names else ""
        out.append(f"{head}data: {json.dumps(event)}\n\n")
    return "".join(out).encode()


def sdk_client(respond: Callable[[httpx2.Request], httpx2.Response], **kwargs: Any) -> Any:
    transport = httpx2.MockTransport(respond)
    factory = kwargs.pop("factory", openai.OpenAI)
    options = {"api_key": "sk-test", "base_url": "http://llm.test/v1"} | kwargs
    return factory(http_client=httpx2.Client(transport=transport), max_retries=0, **options)


def capture_request(
    call: Callable[[Any], Any], reply: bytes, *, stream: bool = False, **kwargs: Any
) -> tuple[str, dict[str, Any]]:
    """Run ``call(client)`` against a mock server; return the path and JSON body it sent."""
    seen: list[httpx2.Request] = []

    def respond(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        kind = "text/event-stream" if stream else "application/json"
        return httpx2.Response(200, content=reply, headers={"content-type": kind})

    result = call(sdk_client(respond, **kwargs))
    if stream:
        for _ in result:
            pass
    (request,) = seen
    return request.url.path, json.loads(request.content)


def chat_completion(
    message: dict[str, Any], finish_reason: str = "stop", **extra: Any
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion",
        "created": 1741569952,
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "refusal": None, "annotations": [], **message},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": USAGE,
        "service_tier": "default",
        "system_fingerprint": "fp_fc9f1d7035",
        **extra,
    }


USAGE = {
    "prompt_tokens": 1219,
    "completion_tokens": 42,
    "total_tokens": 1261,
    "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
    "completion_tokens_details": {
        "reasoning_tokens": 0,
        "audio_tokens": 0,
        "accepted_prediction_tokens": 0,
        "rejected_prediction_tokens": 0,
    },
}
USAGE_ATTRS = {
    "gen_ai.usage.input_tokens": 1219,
    "gen_ai.usage.output_tokens": 42,
    "gen_ai.usage.cache_read.input_tokens": 1024,
    "gen_ai.usage.audio.input_tokens": 0,
    "gen_ai.usage.reasoning.output_tokens": 0,
    "gen_ai.usage.audio.output_tokens": 0,
}
CHAT_RESPONSE_ATTRS = {
    "gen_ai.response.id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
    "gen_ai.response.model": "gpt-4o-2024-08-06",
    "openai.response.service_tier": "default",
    "openai.response.system_fingerprint": "fp_fc9f1d7035",
    **USAGE_ATTRS,
}
MINIMAL_COMPLETION = json.dumps(chat_completion({"content": "ok"})).encode()

WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}

# --- Chat Completions: matching -----------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        ("/v1/chat/completions", {"model": "gpt-4o", "messages": []}, True),
        ("/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}, True),
        ("/openai/deployments/prod-4o/chat/completions", {"messages": []}, True),
        ("/v1/chat/completions/", {"messages": []}, True),
        ("/openai/deployments/d/chat/completions?api-version=2024-10-21", {"messages": []}, True),
        ("/v1/chat/completions", {"model": "gpt-4o", "prompt": "hi"}, False),
        ("/v1/chat/completions", {"messages": "hi"}, False),
        ("/v1/completions", {"messages": []}, False),
        ("/v1/chat/completions/chatcmpl-123/messages", {"messages": []}, False),
        ("/v1/responses", {"model": "gpt-4o", "messages": []}, False),
    ],
)
def test_chat_matches(path: str, body: dict[str, Any], expected: bool) -> None:
    assert OPENAI_CHAT.matches(path, body) is expected
    assert OPENAI_CHAT.name == "openai.chat_completions"


# --- Chat Completions: requests -----------------------------------------------------------


def test_chat_request_with_every_parameter_streaming() -> None:
    path, body = capture_request(
        lambda client: client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[
                {"role": "system", "content": "You are terse."},
                {
                    "role": "developer",
                    "content": [{"type": "text", "text": "Answer in French."}],
                    "name": "policy",
                },
                {"role": "user", "content": "Weather in Paris?", "name": "alice"},
            ],
            max_completion_tokens=256,
            temperature=0.2,
            top_p=1,
            frequency_penalty=0.5,
            presence_penalty=0,
            stop=["\n\n", "END"],
            seed=42,
            n=2,
            response_format={"type": "json_object"},
            service_tier="flex",
            stream=True,
            stream_options={"include_usage": True},
        ),
        sse([]),
        stream=True,
    )
    assert OPENAI_CHAT.matches(path, body)
    assert OPENAI_CHAT.parse_request(path, body) == LlmRequest(
        operation="chat",
        provider="openai",
        model="gpt-4o-mini",
        stream=True,
        attributes={
            "openai.api.type": "chat_completions",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.request.max_tokens": 256,
            "gen_ai.request.temperature": 0.2,
            "gen_ai.request.top_p": 1.0,
            "gen_ai.request.frequency_penalty": 0.5,
            "gen_ai.request.presence_penalty": 0.0,
            "gen_ai.request.stop_sequences": ["\n\n", "END"],
            "gen_ai.request.seed": 42,
            "gen_ai.request.choice.count": 2,
            "gen_ai.output.type": "json",
            "openai.request.service_tier": "flex",
            "gen_ai.request.stream": True,
        },
        system_instructions=[],
        input_messages=[
            {"role": "system", "parts": [{"type": "text", "content": "You are terse."}]},
            {
                "role": "system",
                "parts": [{"type": "text", "content": "Answer in French."}],
                "name": "policy",
            },
            {
                "role": "user",
                "parts": [{"type": "text", "content": "Weather in Paris?"}],
                "name": "alice",
            },
        ],
        tool_definitions=[],
    )


def test_chat_request_tool_round_trip_and_multimodal_parts() -> None:
    path, body = capture_request(
        lambda client: client.chat.completions.create(
            model="gpt-4o",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Compare these"},
                        {
                            "type": "image_url",
                            "image_url": {"url": "https://img.test/cat.png", "detail": "low"},
                        },
                        {
                            "type": "image_url",
                            "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"},
                        },
                        {
                            "type": "input_audio",
                            "input_audio": {"data": "UklGRg==", "format": "wav"},
                        },
                        {"type": "file", "file": {"file_id": "file-abc"}},
                        {
                            "type": "file",
                            "file": {
                                "filename": "a.pdf",
                                "file_data": "data:application/pdf;base64,JVBERi0=",
                            },
                        },
                    ],
                },
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                        },
                        {
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "get_time", "arguments": "now"},
                        },
                        {
                            "id": "call_c",
                            "type": "custom",
                            "custom": {"name": "sql", "input": "SELECT 1"},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": "call_a", "content": "rainy, 57°F"},
                {
                    "role": "tool",
                    "tool_call_id": "call_b",
                    "content": [{"type": "text", "text": "12:00"}],
                },
                {"role": "tool", "tool_call_id": "call_c", "content": "1"},
                {"role": "assistant", "refusal": "I can't help with that."},
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Done."}],
                    "name": "bot",
                },
            ],
            tools=[
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "description": "Current weather for a city",
                        "parameters": WEATHER_PARAMETERS,
                        "strict": True,
                    },
                },
                {"type": "function", "function": {"name": "get_time"}},
                {
                    "type": "custom",
                    "custom": {"name": "sql", "description": "Run SQL", "format": {"type": "text"}},
                },
            ],
            tool_choice="auto",
            parallel_tool_calls=True,
        ),
        MINIMAL_COMPLETION,
    )
    request = OPENAI_CHAT.parse_request(path, body)
    assert request == LlmRequest(
        operation="chat",
        provider="openai",
        model="gpt-4o",
        stream=False,
        attributes={"openai.api.type": "chat_completions", "gen_ai.request.model": "gpt-4o"},
        system_instructions=[],
        input_messages=[
            {
                "role": "user",
                "parts": [
                    {"type": "text", "content": "Compare these"},
                    {"type": "uri", "modality": "image", "uri": "https://img.test/cat.png"},
                    {
                        "type": "blob",
                        "modality": "image",
                        "mime_type": "image/jpeg",
                        "content": "/9j/4AAQ",
                    },
                    {
                        "type": "blob",
                        "modality": "audio",
                        "content": "UklGRg==",
                        "mime_type": "audio/wav",
                    },
                    {"type": "file", "modality": "document", "file_id": "file-abc"},
                    {
                        "type": "blob",
                        "modality": "document",
                        "mime_type": "application/pdf",
                        "content": "JVBERi0=",
                    },
                ],
            },
            {
                "role": "assistant",
                "parts": [
                    {
                        "type": "tool_call",
                        "id": "call_a",
                        "name": "get_weather",
                        "arguments": {"city": "Paris"},
                    },
                    {"type": "tool_call", "id": "call_b", "name": "get_time", "arguments": "now"},
                    {"type": "tool_call", "id": "call_c", "name": "sql", "arguments": "SELECT 1"},
                ],
            },
            {
                "role": "tool",
                "parts": [
                    {"type": "tool_call_response", "id": "call_a", "response": "rainy, 57°F"}
                ],
            },
            {
                "role": "tool",
                "parts": [
                    {
                        "type": "tool_call_response",
                        "id": "call_b",
                        "response": [{"type": "text", "content": "12:00"}],
                    }
                ],
            },
            {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "id": "call_c", "response": "1"}],
            },
            {
                "role": "assistant",
                "parts": [{"type": "refusal", "content": "I can't help with that."}],
            },
            {"role": "assistant", "parts": [{"type": "text", "content": "Done."}], "name": "bot"},
        ],
        tool_definitions=[
            {
                "type": "function",
                "name": "get_weather",
                "description": "Current weather for a city",
                "parameters": WEATHER_PARAMETERS,
            },
            {"type": "function", "name": "get_time"},
            {"type": "custom", "name": "sql", "description": "Run SQL", "format": {"type": "text"}},
        ],
    )


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (
            {"max_tokens": 100, "stop": "END", "n": 1},
            {"gen_ai.request.max_tokens": 100, "gen_ai.request.stop_sequences": ["END"]},
        ),
        ({"max_tokens": 100, "max_completion_tokens": 50}, {"gen_ai.request.max_tokens": 50}),
        ({"service_tier": "auto", "temperature": 1}, {"gen_ai.request.temperature": 1.0}),
        ({"service_tier": "priority"}, {"openai.request.service_tier": "priority"}),
        ({"response_format": {"type": "text"}}, {"gen_ai.output.type": "text"}),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "w", "schema": WEATHER_PARAMETERS},
                }
            },
            {"gen_ai.output.type": "json"},
        ),
        (
            {"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}},
            {"gen_ai.output.type": "speech"},
        ),
        ({"stream": False}, {}),
    ],
)
def test_chat_request_parameters(params: dict[str, Any], expected: dict[str, Any]) -> None:
    path, body = capture_request(
        lambda client: client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}], **params
        ),
        MINIMAL_COMPLETION,
    )
    request = OPENAI_CHAT.parse_request(path, body)
    assert request.attributes == {
        "openai.api.type": "chat_completions",
        "gen_ai.request.model": "gpt-4o",
        **expected,
    }
    assert request.stream is False


def test_chat_request_azure_deployment() -> None:
    path, body = capture_request(
        lambda client: client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        ),
        MINIMAL_COMPLETION,
        factory=openai.AzureOpenAI,
        base_url=None,
        azure_endpoint="https://contoso.openai.azure.test",
        azure_deployment="prod-4o",
        api_version="2024-10-21",
    )
    assert path == "/openai/deployments/prod-4o/chat/completions"
    assert OPENAI_CHAT.matches(path, body)
    assert OPENAI_CHAT.parse_request(path, body).model == "gpt-4o"
    # Azure deployments accept bodies without a model: the deployment names it.
    del body["model"]
    request = OPENAI_CHAT.parse_request(path, body)
    assert (request.model, request.attributes["gen_ai.request.model"]) == ("prod-4o", "prod-4o")


def test_chat_request_legacy_functions_and_odd_values() -> None:
    body = {
        "messages": [
            {"role": "user", "content": None},
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "lookup", "arguments": '{"q": 1}'},
            },
            {"role": "function", "name": "lookup", "content": "found"},
            {
                "role": "user",
                "content": [{"type": "video_url", "video_url": {"url": "https://v.test/a.mp4"}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "x", "prompt_cache_breakpoint": {"mode": "explicit"}}
                ],
            },
        ],
        "functions": [{"name": "lookup", "description": None, "parameters": {"type": "object"}}],
        "temperature": "hot",
        "seed": True,
        "n": None,
        "stop": None,
    }
    assert OPENAI_CHAT.parse_request("/v1/chat/completions", body) == LlmRequest(
        operation="chat",
        provider="openai",
        model=None,
        stream=False,
        attributes={"openai.api.type": "chat_completions"},
        input_messages=[
            {"role": "user", "parts": []},
            {
                "role": "assistant",
                "parts": [
                    {"type": "tool_call", "id": None, "name": "lookup", "arguments": {"q": 1}}
                ],
            },
            {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "id": None, "response": "found"}],
                "name": "lookup",
            },
            {
                "role": "user",
                "parts": [{"type": "video_url", "video_url": {"url": "https://v.test/a.mp4"}}],
            },
            {"role": "user", "parts": [{"type": "text", "content": "x"}]},
        ],
        tool_definitions=[
            {
                "type": "function",
                "name": "lookup",
                "description": None,
                "parameters": {"type": "object"},
            }
        ],
    )


# --- Chat Completions: JSON responses -----------------------------------------------------


def chat_response(body: Any, status: int = 200) -> LlmResponse:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return OPENAI_CHAT.parse_response(status, raw, False)


def test_chat_response_text() -> None:
    assert chat_response(
        chat_completion({"content": "Bonjour ! Il pleut à Paris."})
    ) == LlmResponse(
        attributes={**CHAT_RESPONSE_ATTRS, "gen_ai.response.finish_reasons": ["stop"]},
        output_messages=[
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "Bonjour ! Il pleut à Paris."}],
                "finish_reason": "stop",
            }
        ],
    )


TOOL_CALLS = [
    {
        "id": "call_a",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    },
    {
        "id": "call_b",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Tokyo"'},
    },
]
TOOL_CALL_PARTS = [
    {"type": "tool_call", "id": "call_a", "name": "get_weather", "arguments": {"city": "Paris"}},
    {"type": "tool_call", "id": "call_b", "name": "get_weather", "arguments": '{"city": "Tokyo"'},
]


def test_chat_response_parallel_tool_calls() -> None:
    body = chat_completion({"content": None, "tool_calls": TOOL_CALLS}, "tool_calls")
    assert chat_response(body) == LlmResponse(
        attributes={**CHAT_RESPONSE_ATTRS, "gen_ai.response.finish_reasons": ["tool_calls"]},
        output_messages=[
            {"role": "assistant", "parts": TOOL_CALL_PARTS, "finish_reason": "tool_call"}
        ],
    )


def test_chat_response_two_choices_in_index_order() -> None:
    body = chat_completion({"content": "Why did the span..."})
    first = body["choices"][0]
    second = {
        **first,
        "index": 1,
        "message": {**first["message"], "content": "A trace walks"},
        "finish_reason": "length",
    }
    body["choices"] = [second, first]
    assert chat_response(body) == LlmResponse(
        attributes={**CHAT_RESPONSE_ATTRS, "gen_ai.response.finish_reasons": ["stop", "length"]},
        output_messages=[
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "Why did the span..."}],
                "finish_reason": "stop",
            },
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "A trace walks"}],
                "finish_reason": "length",
            },
        ],
    )


def test_chat_response_refusal_reasoning_and_audio() -> None:
    refusal = chat_completion({"content": None, "refusal": "I'm sorry, I can't assist with that."})
    assert chat_response(refusal).output_messages == [
        {
            "role": "assistant",
            "parts": [{"type": "refusal", "content": "I'm sorry, I can't assist with that."}],
            "finish_reason": "stop",
        }
    ]
    # Compatible servers put chain-of-thought in reasoning_content.
    thinking = chat_completion({"content": "4", "reasoning_content": "2+2 is 4"})
    assert chat_response(thinking).output_messages[0]["parts"] == [
        {"type": "reasoning", "content": "2+2 is 4"},
        {"type": "text", "content": "4"},
    ]
    audio = {"id": "audio_1", "data": "UklGRg==", "expires_at": 1741573552, "transcript": "Hello"}
    spoken = chat_completion({"content": None, "audio": audio})
    assert chat_response(spoken).output_messages[0]["parts"] == [
        {"type": "blob", "modality": "audio", "content": "UklGRg==", "transcript": "Hello"}
    ]


@pytest.mark.parametrize(
    ("status", "body", "error_type"),
    [
        (
            429,
            {
                "error": {
                    "message": "Rate limit reached for gpt-4o on tokens per min (TPM).",
                    "type": "tokens",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            },
            "rate_limit_exceeded",
        ),
        (
            400,
            {
                "error": {
                    "message": "Invalid 'messages'.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": None,
                }
            },
            "invalid_request_error",
        ),
        (
            401,
            {
                "error": {
                    "message": "Incorrect API key provided",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
            "invalid_api_key",
        ),
        (
            429,
            {
                "error": {
                    "code": "429",
                    "message": "Requests to the ChatCompletions_Create Operation have exceeded...",
                }
            },
            "429",
        ),
        (500, {"error": {"message": "The server had an error"}}, None),
        (502, b"<html><body>502 Bad Gateway</body></html>", None),
        (503, b"[]", None),
    ],
)
def test_chat_error_bodies(status: int, body: Any, error_type: str | None) -> None:
    assert chat_response(body, status) == LlmResponse(error_type=error_type)


@pytest.mark.parametrize("body", [b"<html>ok</html>", b"[1, 2]", b"", b"\xff\xfe"])
def test_chat_not_a_completion(body: bytes) -> None:
    with pytest.raises(CodecError):
        OPENAI_CHAT.parse_response(200, body, False)


def test_chat_unknown_fields_and_missing_fields_never_raise() -> None:
    assert chat_response(
        {"object": "chat.completion", "choices": [{"message": None}, "?"], "usage": "n/a"}
    ) == LlmResponse(
        attributes={"gen_ai.response.finish_reasons": ["error"]},
        output_messages=[{"role": "assistant", "parts": [], "finish_reason": "error"}],
    )


# --- Chat Completions: streams ------------------------------------------------------------

CHUNK = {
    "id": "chatcmpl-BGQ0tQ3XtWwhqtM9uSy5hO8l5Hzgw",
    "object": "chat.completion.chunk",
    "created": 1744104139,
    "model": "gpt-4o-mini-2024-07-18",
    "service_tier": "default",
    "system_fingerprint": "fp_b376dfbbd5",
}
STREAM_ATTRS = {
    "gen_ai.response.id": "chatcmpl-BGQ0tQ3XtWwhqtM9uSy5hO8l5Hzgw",
    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
    "openai.response.service_tier": "default",
    "openai.response.system_fingerprint": "fp_b376dfbbd5",
}


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, index: int = 0, **extra: Any
) -> dict[str, Any]:
    choices = (
        []
        if delta is None
        else [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}]
    )
    return {**CHUNK, "choices": choices, "usage": None, **extra}


TEXT_CHUNKS = [
    chunk({"role": "assistant", "content": "", "refusal": None}),
    chunk({"content": "Il "}),
    chunk({"content": "pleut"}),
    chunk({"content": " à Paris."}),
    chunk({}, "stop"),
    chunk(None, usage=USAGE),
]
TOOL_CHUNKS = [
    chunk(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ""},
                }
            ],
            "refusal": None,
        }
    ),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Par'}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'is"}'}}]}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 1,
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ""},
                }
            ]
        }
    ),
    chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"city": '}}]}),
    chunk({"tool_calls": [{"index": 1, "function": {"arguments": '"Tokyo"'}}]}),
    chunk({}, "tool_calls"),
    chunk(None, usage=USAGE),
]
TWO_CHOICE_CHUNKS = [
    chunk({"role": "assistant", "content": ""}, index=0),
    chunk({"role": "assistant", "content": ""}, index=1),
    chunk({"content": "Why did"}, index=0),
    chunk({"content": "A trace"}, index=1),
    chunk({"content": " the span..."}, index=0),
    chunk({}, "length", index=1),
    chunk({}, "stop", index=0),
]


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        pytest.param(
            TEXT_CHUNKS,
            LlmResponse(
                attributes={
                    **STREAM_ATTRS,
                    **USAGE_ATTRS,
                    "gen_ai.response.finish_reasons": ["stop"],
                },
                output_messages=[
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": "Il pleut à Paris."}],
                        "finish_reason": "stop",
                    }
                ],
            ),
            id="text-with-include-usage",
        ),
        pytest.param(
            TOOL_CHUNKS,
            LlmResponse(
                attributes={
                    **STREAM_ATTRS,
                    **USAGE_ATTRS,
                    "gen_ai.response.finish_reasons": ["tool_calls"],
                },
                output_messages=[
                    {
                        "role": "assistant",
                        "parts": [
                            {
                                "type": "tool_call",
                                "id": "call_a",
                                "name": "get_weather",
                                "arguments": {"city": "Paris"},
                            },
                            {
                                "type": "tool_call",
                                "id": "call_b",
                                "name": "get_weather",
                                "arguments": '{"city": "Tokyo"',
                            },
                        ],
                        "finish_reason": "tool_call",
                    }
                ],
            ),
            id="parallel-tool-calls-split-mid-arguments",
        ),
        pytest.param(
            TWO_CHOICE_CHUNKS,
            LlmResponse(
                attributes={**STREAM_ATTRS, "gen_ai.response.finish_reasons": ["stop", "length"]},
                output_messages=[
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": "Why did the span..."}],
                        "finish_reason": "stop",
                    },
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": "A trace"}],
                        "finish_reason": "length",
                    },
                ],
            ),
            id="n-2-interleaved",
        ),
        pytest.param(
            [
                chunk({"role": "assistant", "content": None, "refusal": ""}),
                chunk({"refusal": "I can't"}),
                chunk({"refusal": " help."}),
                chunk({}, "stop"),
            ],
            LlmResponse(
                attributes={**STREAM_ATTRS, "gen_ai.response.finish_reasons": ["stop"]},
                output_messages=[
                    {
                        "role": "assistant",
                        "parts": [{"type": "refusal", "content": "I can't help."}],
                        "finish_reason": "stop",
                    }
                ],
            ),
            id="refusal",
        ),
    ],
)
def test_chat_stream(chunks: list[dict[str, Any]], expected: LlmResponse) -> None:
    assert OPENAI_CHAT.parse_response(200, sse(chunks), True) == expected


@pytest.mark.parametrize(
    "chunks", [TEXT_CHUNKS, TOOL_CHUNKS, TWO_CHOICE_CHUNKS], ids=["text", "tools", "n2"]
)
def test_chat_stream_agrees_with_the_sdk_accumulation(chunks: list[dict[str, Any]]) -> None:
    """The SDK accepts each fixture, and its own assembled completion reads the same."""
    body = sse(chunks)

    def respond(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})

    client = sdk_client(respond)
    with client.chat.completions.stream(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        for _ in stream:
            pass
        # The snapshot, not get_final_completion(): the SDK's parsing refuses "length".
        final = stream.current_completion_snapshot
    from_sdk = chat_response(final.model_dump(mode="json"))
    assert OPENAI_CHAT.parse_response(200, body, True) == from_sdk


def test_chat_stream_cut_short_keeps_partial_text() -> None:
    body = (
        sse(TEXT_CHUNKS[:3], done=False)
        + b'data: {"id": "chatcmpl-BGQ0tQ3XtWwhqtM9uSy5hO8l5Hzgw", "obj'
    )
    assert OPENAI_CHAT.parse_response(200, body, True) == LlmResponse(
        attributes={**STREAM_ATTRS, "gen_ai.response.finish_reasons": ["error"]},
        output_messages=[
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "Il pleut"}],
                "finish_reason": "error",
            }
        ],
        finished=False,
    )


def test_chat_stream_cut_mid_tool_arguments_keeps_raw_arguments() -> None:
    body = sse(TOOL_CHUNKS[:3], done=False)
    result = OPENAI_CHAT.parse_response(200, body, True)
    assert not result.finished
    assert result.output_messages == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_a",
                    "name": "get_weather",
                    "arguments": '{"city": "Par',
                }
            ],
            "finish_reason": "error",
        }
    ]


def test_chat_stream_error_event() -> None:
    error = {
        "error": {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }
    body = sse([*TEXT_CHUNKS[:2], error], done=False)
    assert OPENAI_CHAT.parse_response(200, body, True) == LlmResponse(
        attributes={**STREAM_ATTRS, "gen_ai.response.finish_reasons": ["error"]},
        output_messages=[
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "Il "}],
                "finish_reason": "error",
            }
        ],
        error_type="server_error",
        finished=False,
    )


def test_chat_stream_azure_filter_chunk_and_unindexed_tool_calls() -> None:
    azure_first = {
        "id": "",
        "object": "",
        "created": 0,
        "model": "",
        "choices": [],
        "prompt_filter_results": [{"prompt_index": 0}],
    }
    whole_calls = chunk(
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "a", "arguments": "{}"}},
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "b", "arguments": '{"x": 1}'},
                },
            ],
        },
        "tool_calls",
    )
    result = OPENAI_CHAT.parse_response(200, sse([azure_first, whole_calls]), True)
    assert result == LlmResponse(
        attributes={**STREAM_ATTRS, "gen_ai.response.finish_reasons": ["tool_calls"]},
        output_messages=[
            {
                "role": "assistant",
                "parts": [
                    {"type": "tool_call", "id": "call_1", "name": "a", "arguments": {}},
                    {"type": "tool_call", "id": "call_2", "name": "b", "arguments": {"x": 1}},
                ],
                "finish_reason": "tool_call",
            }
        ],
    )


def test_chat_streamed_request_answered_with_json() -> None:
    body = json.dumps(chat_completion({"content": "hi"})).encode()
    assert OPENAI_CHAT.parse_response(200, body, True) == chat_response(
        chat_completion({"content": "hi"})
    )


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"data: {",
        b": keep-alive\n\n",
        b"data: [DONE]\n\n",
        b"data: 42\n\ndata: null\n\n",
        b"\xff\xfe\x00",
    ],
)
def test_chat_garbage_streams_never_raise(body: bytes) -> None:
    # Only "[DONE]" says the stream ended where the provider ended it.
    assert OPENAI_CHAT.parse_response(200, body, True) == LlmResponse(finished=b"[DONE]" in body)


# --- Responses: matching ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        ("/v1/responses", {"model": "gpt-4.1", "input": "hi"}, True),
        ("/v1/responses", {"input": "hi"}, True),
        ("/openai/v1/responses?api-version=preview", {"model": "gpt-4.1"}, True),
        ("/openai/deployments/prod-41/responses", {"input": []}, True),
        ("/v1/responses", {"previous_response_id": "resp_1"}, False),
        ("/v1/responses/resp_123", {"model": "gpt-4.1"}, False),
        ("/v1/responses/resp_123/cancel", {"model": "gpt-4.1"}, False),
        ("/v1/responses/input_tokens", {"model": "gpt-4.1", "input": "hi"}, False),
        ("/v1/responses/compact", {"model": "gpt-4.1", "input": "hi"}, False),
        ("/v1/chat/completions", {"model": "gpt-4.1", "input": "hi"}, False),
    ],
)
def test_responses_matches(path: str, body: dict[str, Any], expected: bool) -> None:
    assert OPENAI_RESPONSES.matches(path, body) is expected
    assert OPENAI_RESPONSES.name == "openai.responses"


# --- Responses: requests ------------------------------------------------------------------

MINIMAL_RESPONSE = json.dumps(
    {
        "id": "resp_0",
        "object": "response",
        "created_at": 1741476542,
        "status": "completed",
        "model": "gpt-4.1-2025-04-14",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
).encode()


def test_responses_request_string_input_and_parameters() -> None:
    path, body = capture_request(
        lambda client: client.responses.create(
            model="gpt-4.1",
            instructions="You are a weather bot.",
            input="Weather in Paris?",
            max_output_tokens=512,
            temperature=0.7,
            top_p=0.9,
            text={
                "format": {
                    "type": "json_schema",
                    "name": "weather",
                    "schema": WEATHER_PARAMETERS,
                    "strict": True,
                }
            },
            service_tier="default",
            conversation="conv_689667905b048191b4740501625afd940c7533ace33a2dab",
            stream=True,
        ),
        named_sse([]),
        stream=True,
    )
    assert OPENAI_RESPONSES.matches(path, body)
    assert OPENAI_RESPONSES.parse_request(path, body) == LlmRequest(
        operation="chat",
        provider="openai",
        model="gpt-4.1",
        stream=True,
        attributes={
            "openai.api.type": "responses",
            "gen_ai.request.model": "gpt-4.1",
            "gen_ai.request.max_tokens": 512,
            "gen_ai.request.temperature": 0.7,
            "gen_ai.request.top_p": 0.9,
            "gen_ai.output.type": "json",
            "openai.request.service_tier": "default",
            "gen_ai.conversation.id": "conv_689667905b048191b4740501625afd940c7533ace33a2dab",
            "gen_ai.request.stream": True,
        },
        system_instructions=[{"type": "text", "content": "You are a weather bot."}],
        input_messages=[
            {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}
        ],
        tool_definitions=[],
    )


def test_responses_request_item_list_with_echoed_output() -> None:
    path, body = capture_request(
        lambda client: client.responses.create(
            model="o4-mini",
            input=[
                {"role": "developer", "content": "Prefer metric units."},
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "Weather here and in Tokyo?"},
                        {
                            "type": "input_image",
                            "image_url": "https://img.test/map.png",
                            "detail": "auto",
                        },
                        {"type": "input_image", "file_id": "file-img", "detail": "high"},
                        {
                            "type": "input_file",
                            "filename": "notes.pdf",
                            "file_data": "data:application/pdf;base64,JVBERi0=",
                        },
                        {"type": "input_file", "file_url": "https://docs.test/report.pdf"},
                    ],
                },
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [
                        {"type": "summary_text", "text": "Two cities: call the tool twice."}
                    ],
                    "encrypted_content": "gAAAAABo",
                },
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
                },
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": "get_weather",
                    "arguments": '{"city":"Paris"}',
                },
                {
                    "type": "function_call",
                    "id": "fc_2",
                    "call_id": "call_2",
                    "name": "get_weather",
                    "arguments": '{"city":"Tokyo"}',
                },
                {"type": "function_call_output", "call_id": "call_1", "output": '{"temp": 14}'},
                {
                    "type": "function_call_output",
                    "call_id": "call_2",
                    "output": [{"type": "input_text", "text": "22C"}],
                },
                {
                    "type": "web_search_call",
                    "id": "ws_1",
                    "status": "completed",
                    "action": {"type": "search", "query": "tokyo"},
                },
                {"type": "item_reference", "id": "msg_0"},
            ],
            tools=[
                {
                    "type": "function",
                    "name": "get_weather",
                    "description": "Current weather",
                    "parameters": WEATHER_PARAMETERS,
                    "strict": True,
                },
                {"type": "web_search"},
                {
                    "type": "mcp",
                    "server_label": "deepwiki",
                    "server_url": "https://mcp.test/mcp",
                    "require_approval": "never",
                    "headers": {"Authorization": "Bearer secret"},
                },
            ],
            reasoning={"effort": "low", "summary": "auto"},
        ),
        MINIMAL_RESPONSE,
    )
    assert OPENAI_RESPONSES.parse_request(path, body) == LlmRequest(
        operation="chat",
        provider="openai",
        model="o4-mini",
        stream=False,
        attributes={"openai.api.type": "responses", "gen_ai.request.model": "o4-mini"},
        system_instructions=[],
        input_messages=[
            {"role": "system", "parts": [{"type": "text", "content": "Prefer metric units."}]},
            {
                "role": "user",
                "parts": [
                    {"type": "text", "content": "Weather here and in Tokyo?"},
                    {"type": "uri", "modality": "image", "uri": "https://img.test/map.png"},
                    {"type": "file", "modality": "image", "file_id": "file-img"},
                    {
                        "type": "blob",
                        "modality": "document",
                        "mime_type": "application/pdf",
                        "content": "JVBERi0=",
                    },
                    {"type": "uri", "modality": "document", "uri": "https://docs.test/report.pdf"},
                ],
            },
            {
                "role": "assistant",
                "parts": [
                    {"type": "reasoning", "content": "Two cities: call the tool twice."},
                    {"type": "text", "content": "Checking."},
                    {
                        "type": "tool_call",
                        "id": "call_1",
                        "name": "get_weather",
                        "arguments": {"city": "Paris"},
                    },
                    {
                        "type": "tool_call",
                        "id": "call_2",
                        "name": "get_weather",
                        "arguments": {"city": "Tokyo"},
                    },
                ],
            },
            {
                "role": "tool",
                "parts": [
                    {"type": "tool_call_response", "id": "call_1", "response": '{"temp": 14}'}
                ],
            },
            {
                "role": "tool",
                "parts": [
                    {
                        "type": "tool_call_response",
                        "id": "call_2",
                        "response": [{"type": "text", "content": "22C"}],
                    }
                ],
            },
            {
                "role": "assistant",
                "parts": [
                    {
                        "type": "server_tool_call",
                        "id": "ws_1",
                        "name": "web_search",
                        "server_tool_call": {
                            "type": "web_search",
                            "action": {"type": "search", "query": "tokyo"},
                        },
                    }
                ],
            },
            {"role": "user", "parts": [{"type": "item_reference", "id": "msg_0"}]},
        ],
        tool_definitions=[
            {
                "type": "function",
                "name": "get_weather",
                "description": "Current weather",
                "parameters": WEATHER_PARAMETERS,
            },
            {"type": "web_search", "name": "web_search"},
            {
                "type": "mcp",
                "server_label": "deepwiki",
                "server_url": "https://mcp.test/mcp",
                "require_approval": "never",
                "name": "mcp",
            },
        ],
    )


def test_responses_request_azure_and_odd_values() -> None:
    body = {
        "input": [{"role": "system", "content": [{"type": "input_text", "text": "Be brief."}]}, 7],
        "instructions": [{"type": "message", "role": "developer", "content": "Use tools."}],
        "service_tier": "auto",
        "text": {"format": {"type": "text"}},
        "conversation": {"id": "conv_1"},
        "max_output_tokens": "lots",
        "tools": [{"type": "custom", "name": "grammar", "format": {"type": "text"}}, "??"],
    }
    assert OPENAI_RESPONSES.parse_request(
        "/openai/deployments/prod-41/responses", body
    ) == LlmRequest(
        operation="chat",
        provider="openai",
        model="prod-41",
        stream=False,
        attributes={
            "openai.api.type": "responses",
            "gen_ai.request.model": "prod-41",
            "gen_ai.output.type": "text",
            "gen_ai.conversation.id": "conv_1",
        },
        system_instructions=[{"type": "text", "content": "Use tools."}],
        input_messages=[
            {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
            {"role": "user", "parts": [{"type": "int", "value": 7}]},
        ],
        tool_definitions=[{"type": "custom", "name": "grammar", "format": {"type": "text"}}],
    )


# --- Responses: JSON responses ------------------------------------------------------------

RESPONSE_USAGE = {
    "input_tokens": 2048,
    "input_tokens_details": {"cached_tokens": 1536},
    "output_tokens": 300,
    "output_tokens_details": {"reasoning_tokens": 192},
    "total_tokens": 2348,
}
RESPONSE_USAGE_ATTRS = {
    "gen_ai.usage.input_tokens": 2048,
    "gen_ai.usage.output_tokens": 300,
    "gen_ai.usage.cache_read.input_tokens": 1536,
    "gen_ai.usage.reasoning.output_tokens": 192,
}
RESP_ID = "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b"
RESPONSE_ATTRS = {
    "gen_ai.response.id": RESP_ID,
    "gen_ai.response.model": "o4-mini-2025-04-16",
    "openai.response.service_tier": "default",
    **RESPONSE_USAGE_ATTRS,
}
REASONING_ITEM = {
    "id": "rs_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b",
    "type": "reasoning",
    "summary": [
        {"type": "summary_text", "text": "**Checking the weather**"},
        {"type": "summary_text", "text": "I need the tool for both cities."},
    ],
    "encrypted_content": None,
}
MESSAGE_ITEM = {
    "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b",
    "type": "message",
    "status": "completed",
    "role": "assistant",
    "content": [
        {
            "type": "output_text",
            "text": "Checking both cities now.",
            "annotations": [],
            "logprobs": [],
        }
    ],
}
CALL_ITEMS = [
    {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "arguments": '{"city":"Paris"}',
        "call_id": "call_1",
        "name": "get_weather",
    },
    {
        "id": "fc_2",
        "type": "function_call",
        "status": "completed",
        "arguments": '{"city":"Tokyo"}',
        "call_id": "call_2",
        "name": "get_weather",
    },
]
TOOL_TURN_PARTS = [
    {"type": "reasoning", "content": "**Checking the weather**"},
    {"type": "reasoning", "content": "I need the tool for both cities."},
    {"type": "text", "content": "Checking both cities now."},
    {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}},
    {"type": "tool_call", "id": "call_2", "name": "get_weather", "arguments": {"city": "Tokyo"}},
]


def response_object(
    output: list[dict[str, Any]], status: str = "completed", **extra: Any
) -> dict[str, Any]:
    return {
        "id": RESP_ID,
        "object": "response",
        "created_at": 1741476542,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": "o4-mini-2025-04-16",
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": "low", "summary": "auto"},
        "service_tier": "default",
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": RESPONSE_USAGE,
        "user": None,
        "metadata": {},
        **extra,
    }


def responses_response(body: Any, status: int = 200) -> LlmResponse:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return OPENAI_RESPONSES.parse_response(status, raw, False)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            response_object([MESSAGE_ITEM]),
            LlmResponse(
                attributes={**RESPONSE_ATTRS, "gen_ai.response.finish_reasons": ["stop"]},
                output_messages=[
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": "Checking both cities now."}],
                        "finish_reason": "stop",
                    }
                ],
            ),
            id="text",
        ),
        pytest.param(
            response_object([REASONING_ITEM, MESSAGE_ITEM, *CALL_ITEMS]),
            LlmResponse(
                attributes={**RESPONSE_ATTRS, "gen_ai.response.finish_reasons": ["tool_call"]},
                output_messages=[
                    {"role": "assistant", "parts": TOOL_TURN_PARTS, "finish_reason": "tool_call"}
                ],
            ),
            id="reasoning-and-parallel-function-calls",
        ),
        pytest.param(
            response_object(
                [
                    {
                        **MESSAGE_ITEM,
                        "status": "incomplete",
                        "content": [{"type": "output_text", "text": "Checking", "annotations": []}],
                    }
                ],
                "incomplete",
                incomplete_details={"reason": "max_output_tokens"},
            ),
            LlmResponse(
                attributes={**RESPONSE_ATTRS, "gen_ai.response.finish_reasons": ["length"]},
                output_messages=[
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": "Checking"}],
                        "finish_reason": "length",
                    }
                ],
            ),
            id="incomplete-max-output-tokens",
        ),
        pytest.param(
            response_object([], "incomplete", incomplete_details={"reason": "content_filter"}),
            LlmResponse(
                attributes={**RESPONSE_ATTRS, "gen_ai.response.finish_reasons": ["content_filter"]},
                output_messages=[
                    {"role": "assistant", "parts": [], "finish_reason": "content_filter"}
                ],
            ),
            id="incomplete-content-filter",
        ),
        pytest.param(
            response_object(
                [],
                "failed",
                error={
                    "code": "server_error",
                    "message": "The model failed to generate a response.",
                },
                usage=None,
            ),
            LlmResponse(
                attributes={
                    "gen_ai.response.id": RESP_ID,
                    "gen_ai.response.model": "o4-mini-2025-04-16",
                    "openai.response.service_tier": "default",
                },
                error_type="server_error",
            ),
            id="failed",
        ),
        pytest.param(
            response_object(
                [
                    {
                        **MESSAGE_ITEM,
                        "content": [{"type": "refusal", "refusal": "I can't help with that."}],
                    }
                ],
                "cancelled",
            ),
            LlmResponse(
                attributes={**RESPONSE_ATTRS, "gen_ai.response.finish_reasons": ["cancelled"]},
                output_messages=[
                    {
                        "role": "assistant",
                        "parts": [{"type": "refusal", "content": "I can't help with that."}],
                        "finish_reason": "cancelled",
                    }
                ],
            ),
            id="refusal-cancelled",
        ),
        pytest.param(
            response_object(
                [
                    {
                        "id": "ws_1",
                        "type": "web_search_call",
                        "status": "completed",
                        "action": {"type": "search", "query": "paris weather"},
                    },
                    {
                        "id": "ci_1",
                        "type": "code_interpreter_call",
                        "status": "completed",
                        "code": "print(6*7)",
                        "container_id": "cntr_1",
                        "outputs": [{"type": "logs", "logs": "42"}],
                    },
                    {
                        "id": "mcp_1",
                        "type": "mcp_call",
                        "name": "ask_question",
                        "server_label": "deepwiki",
                        "arguments": "{}",
                        "output": "yes",
                        "error": None,
                    },
                    {
                        "id": "cu_1",
                        "type": "computer_call",
                        "call_id": "call_cu",
                        "action": {"type": "screenshot"},
                        "pending_safety_checks": [],
                        "status": "completed",
                    },
                ]
            ),
            LlmResponse(
                attributes={**RESPONSE_ATTRS, "gen_ai.response.finish_reasons": ["tool_call"]},
                output_messages=[
                    {
                        "role": "assistant",
                        "parts": [
                            {
                                "type": "server_tool_call",
                                "id": "ws_1",
                                "name": "web_search",
                                "server_tool_call": {
                                    "type": "web_search",
                                    "action": {"type": "search", "query": "paris weather"},
                                },
                            },
                            {
                                "type": "server_tool_call",
                                "id": "ci_1",
                                "name": "code_interpreter",
                                "server_tool_call": {
                                    "type": "code_interpreter",
                                    "code": "print(6*7)",
                                    "container_id": "cntr_1",
                                },
                            },
                            {
                                "type": "server_tool_call_response",
                                "id": "ci_1",
                                "server_tool_call_response": {
                                    "type": "code_interpreter",
                                    "outputs": [{"type": "logs", "logs": "42"}],
                                },
                            },
                            {
                                "type": "server_tool_call",
                                "id": "mcp_1",
                                "name": "ask_question",
                                "server_tool_call": {
                                    "type": "mcp",
                                    "name": "ask_question",
                                    "server_label": "deepwiki",
                                    "arguments": "{}",
                                },
                            },
                            {
                                "type": "server_tool_call_response",
                                "id": "mcp_1",
                                "server_tool_call_response": {"type": "mcp", "output": "yes"},
                            },
                            {
                                "id": "cu_1",
                                "type": "computer_call",
                                "call_id": "call_cu",
                                "action": {"type": "screenshot"},
                                "pending_safety_checks": [],
                                "status": "completed",
                            },
                        ],
                        "finish_reason": "tool_call",
                    }
                ],
            ),
            id="built-in-tools",
        ),
        pytest.param(
            response_object(
                [
                    {
                        "id": "cmp_1",
                        "type": "compaction",
                        "encrypted_content": "gAAAAABo",
                        "created_by": "system",
                    }
                ]
            ),
            LlmResponse(
                attributes={**RESPONSE_ATTRS, "gen_ai.response.finish_reasons": ["compaction"]},
                output_messages=[
                    {
                        "role": "assistant",
                        "parts": [{"type": "compaction", "id": "cmp_1"}],
                        "finish_reason": "compaction",
                    }
                ],
            ),
            id="compaction",
        ),
    ],
)
def test_responses_response(body: dict[str, Any], expected: LlmResponse) -> None:
    assert responses_response(body) == expected


@pytest.mark.parametrize(
    ("status", "body", "error_type"),
    [
        (
            429,
            {
                "error": {
                    "message": "Rate limit reached",
                    "type": "requests",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            },
            "rate_limit_exceeded",
        ),
        (
            400,
            {
                "error": {
                    "message": "Unsupported parameter: 'temperature'",
                    "type": "invalid_request_error",
                    "param": "temperature",
                    "code": "unsupported_parameter",
                }
            },
            "unsupported_parameter",
        ),
        (
            404,
            {
                "error": {
                    "message": "Not found",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": None,
                }
            },
            "invalid_request_error",
        ),
        (504, b"upstream request timeout", None),
    ],
)
def test_responses_error_bodies(status: int, body: Any, error_type: str | None) -> None:
    assert responses_response(body, status) == LlmResponse(error_type=error_type)


@pytest.mark.parametrize("body", [b"not json", b'"text"'])
def test_responses_not_a_response(body: bytes) -> None:
    with pytest.raises(CodecError):
        OPENAI_RESPONSES.parse_response(200, body, False)


# --- Responses: streams -------------------------------------------------------------------


def tool_turn_events() -> list[dict[str, Any]]:
    """The events OpenAI streams for reasoning + text + two function calls, in order."""
    snapshot = response_object([], "in_progress", usage=None, service_tier="auto")
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": snapshot},
        {"type": "response.in_progress", "response": snapshot},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**REASONING_ITEM, "summary": []},
        },
    ]
    for i, summary in enumerate(REASONING_ITEM["summary"]):
        text = summary["text"]
        events += [
            {
                "type": "response.reasoning_summary_part.added",
                "item_id": REASONING_ITEM["id"],
                "output_index": 0,
                "summary_index": i,
                "part": {"type": "summary_text", "text": ""},
            },
            *(
                {
                    "type": "response.reasoning_summary_text.delta",
                    "item_id": REASONING_ITEM["id"],
                    "output_index": 0,
                    "summary_index": i,
                    "delta": piece,
                    "obfuscation": "x",
                }
                for piece in (text[:5], text[5:])
            ),
            {
                "type": "response.reasoning_summary_text.done",
                "item_id": REASONING_ITEM["id"],
                "output_index": 0,
                "summary_index": i,
                "text": text,
            },
            {
                "type": "response.reasoning_summary_part.done",
                "item_id": REASONING_ITEM["id"],
                "output_index": 0,
                "summary_index": i,
                "part": summary,
            },
        ]
    events.append({"type": "response.output_item.done", "output_index": 0, "item": REASONING_ITEM})
    message_id = MESSAGE_ITEM["id"]
    empty_text = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    events += [
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**MESSAGE_ITEM, "status": "in_progress", "content": []},
        },
        {
            "type": "response.content_part.added",
            "item_id": message_id,
            "output_index": 1,
            "content_index": 0,
            "part": empty_text,
        },
        *(
            {
                "type": "response.output_text.delta",
                "item_id": message_id,
                "output_index": 1,
                "content_index": 0,
                "delta": piece,
                "logprobs": [],
            }
            for piece in ("Checking ", "both cities", " now.")
        ),
        {
            "type": "response.output_text.done",
            "item_id": message_id,
            "output_index": 1,
            "content_index": 0,
            "text": "Checking both cities now.",
            "logprobs": [],
        },
        {
            "type": "response.content_part.done",
            "item_id": message_id,
            "output_index": 1,
            "content_index": 0,
            "part": MESSAGE_ITEM["content"][0],
        },
        {"type": "response.output_item.done", "output_index": 1, "item": MESSAGE_ITEM},
    ]
    for offset, call in enumerate(CALL_ITEMS, start=2):
        args = call["arguments"]
        events += [
            {
                "type": "response.output_item.added",
                "output_index": offset,
                "item": {**call, "arguments": "", "status": "in_progress"},
            },
            *(
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": call["id"],
                    "output_index": offset,
                    "delta": piece,
                }
                for piece in (args[:6], args[6:11], args[11:])
            ),
            {
                "type": "response.function_call_arguments.done",
                "item_id": call["id"],
                "output_index": offset,
                "arguments": args,
            },
            {"type": "response.output_item.done", "output_index": offset, "item": call},
        ]
    events.append(
        {
            "type": "response.completed",
            "response": response_object([REASONING_ITEM, MESSAGE_ITEM, *CALL_ITEMS]),
        }
    )
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


TOOL_TURN = LlmResponse(
    attributes={**RESPONSE_ATTRS, "gen_ai.response.finish_reasons": ["tool_call"]},
    output_messages=[{"role": "assistant", "parts": TOOL_TURN_PARTS, "finish_reason": "tool_call"}],
)


def without_terminal_output(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    final = {**events[-1]["response"]}
    del final["output"]
    return [*events[:-1], {**events[-1], "response": final}]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(named_sse(tool_turn_events()), id="named-events"),
        pytest.param(named_sse(tool_turn_events(), names=False), id="data-only-events"),
        pytest.param(
            named_sse(without_terminal_output(tool_turn_events())), id="terminal-without-output"
        ),
        pytest.param(named_sse(tool_turn_events()).replace(b"\n", b"\r\n"), id="crlf"),
    ],
)
def test_responses_stream(body: bytes) -> None:
    assert OPENAI_RESPONSES.parse_response(200, body, True) == TOOL_TURN


def test_responses_stream_agrees_with_the_sdk_accumulation() -> None:
    body = named_sse(tool_turn_events())

    def respond(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})

    client = sdk_client(respond)
    with client.responses.stream(model="o4-mini", input="Weather in Paris and Tokyo?") as stream:
        final = stream.get_final_response()
    assert responses_response(final.model_dump(mode="json")) == TOOL_TURN


def test_responses_stream_cut_mid_function_arguments() -> None:
    events = tool_turn_events()
    cut = next(
        i
        for i, e in enumerate(events)
        if e["type"] == "response.function_call_arguments.delta" and e["output_index"] == 3
    )
    body = (
        named_sse(events[: cut + 1])
        + b'event: response.function_call_arguments.delta\ndata: {"type": "resp'
    )
    assert OPENAI_RESPONSES.parse_response(200, body, True) == LlmResponse(
        attributes={
            "gen_ai.response.id": RESP_ID,
            "gen_ai.response.model": "o4-mini-2025-04-16",
            "openai.response.service_tier": "auto",
            "gen_ai.response.finish_reasons": ["error"],
        },
        output_messages=[
            {
                "role": "assistant",
                "parts": [
                    *TOOL_TURN_PARTS[:4],
                    {
                        "type": "tool_call",
                        "id": "call_2",
                        "name": "get_weather",
                        "arguments": '{"city',
                    },
                ],
                "finish_reason": "error",
            }
        ],
        finished=False,
    )


def test_responses_stream_cut_mid_text_without_done_events() -> None:
    events = tool_turn_events()
    first_text = next(i for i, e in enumerate(events) if e["type"] == "response.output_text.delta")
    body = named_sse(events[: first_text + 2], names=False)
    result = OPENAI_RESPONSES.parse_response(200, body, True)
    assert not result.finished
    assert result.output_messages == [
        {
            "role": "assistant",
            "parts": [*TOOL_TURN_PARTS[:2], {"type": "text", "content": "Checking both cities"}],
            "finish_reason": "error",
        }
    ]


def test_responses_stream_error_event() -> None:
    events = tool_turn_events()[:2]
    error = {
        "type": "error",
        "code": "server_error",
        "message": "The server had an error.",
        "param": None,
        "sequence_number": 2,
    }
    body = named_sse([*events, error])
    assert OPENAI_RESPONSES.parse_response(200, body, True) == LlmResponse(
        attributes={
            "gen_ai.response.id": RESP_ID,
            "gen_ai.response.model": "o4-mini-2025-04-16",
            "openai.response.service_tier": "auto",
        },
        error_type="server_error",
        finished=False,
    )


def test_responses_stream_failed() -> None:
    events = tool_turn_events()[:2]
    failed = response_object(
        [], "failed", error={"code": "rate_limit_exceeded", "message": "slow down"}, usage=None
    )
    body = named_sse(
        [*events, {"type": "response.failed", "response": failed, "sequence_number": 2}]
    )
    assert OPENAI_RESPONSES.parse_response(200, body, True) == LlmResponse(
        attributes={
            "gen_ai.response.id": RESP_ID,
            "gen_ai.response.model": "o4-mini-2025-04-16",
            "openai.response.service_tier": "default",
        },
        error_type="rate_limit_exceeded",
    )


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"event: response.completed\ndata: nope\n\n",
        b"data: [DONE]\n\n",
        b"event: response.completed\ndata: []\n\n",
        b'data: {"type": 5}\n\n',
    ],
)
def test_responses_garbage_streams_never_raise(body: bytes) -> None:
    assert OPENAI_RESPONSES.parse_response(200, body, True) == LlmResponse(finished=False)
