"""The real openai and anthropic SDKs accept synthesised responses, streamed and not.

MockTransport stands in for the provider only: it serves the synthesised bytes, split at the
synthesised chunk boundaries, to an SDK client built on a real httpx2 client.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from otel_replay.replay.synth import Synthesized, synthesize

KEY = "sk-synth-test"
ARGS = {"order_id": "A-1234", "verbose": True}
OUTPUT = [
    {
        "role": "assistant",
        "parts": [
            {"type": "text", "content": "Let me look that up."},
            {"type": "tool_call", "id": "call_7", "name": "lookup_order", "arguments": ARGS},
        ],
        "finish_reason": "tool_call",
    }
]
USAGE = {
    "gen_ai.usage.input_tokens": 120,
    "gen_ai.usage.output_tokens": 17,
    "gen_ai.usage.cache_read.input_tokens": 100,
}


def span(model: str, response_id: str, finish: str) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.response.model": model + "-2025",
        "gen_ai.response.id": response_id,
        "gen_ai.response.finish_reasons": (finish,),
        "gen_ai.output.messages": json.dumps(OUTPUT),
        **USAGE,
    }


def _pieces(made: Synthesized) -> list[bytes]:
    pieces, offset = [], 0
    for size, _ in made.chunks or ((len(made.body), 0),):
        pieces.append(made.body[offset : offset + size])
        offset += size
    return pieces


def transport(made: Synthesized, *, asynchronous: bool = False) -> httpx2.MockTransport:
    """Serves ``made`` to every request, one synthesised chunk at a time."""

    class Sync(httpx2.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield from _pieces(made)

    class Async(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for piece in _pieces(made):
                yield piece

    def handler(request: httpx2.Request) -> httpx2.Response:
        stream = Async() if asynchronous else Sync()
        return httpx2.Response(made.status_code, headers=list(made.headers), stream=stream)

    return httpx2.MockTransport(handler)


def openai_client(made: Synthesized) -> openai.OpenAI:
    http = httpx2.Client(transport=transport(made))
    return openai.OpenAI(api_key=KEY, http_client=http, max_retries=0)


def anthropic_client(made: Synthesized) -> anthropic.Anthropic:
    http = httpx2.Client(transport=transport(made))
    return anthropic.Anthropic(api_key=KEY, http_client=http, max_retries=0)


CHAT_PARAMS: dict[str, Any] = {
    "model": "gpt-4o",
    "messages": [{"role": "user", "content": "Where is my order A-1234?"}],
}


def test_openai_chat_completion() -> None:
    made = synthesize("openai.chat_completions", span("gpt-4o", "chatcmpl-9", "tool_calls"), False)
    with openai_client(made) as client:
        completion = client.chat.completions.create(**CHAT_PARAMS)
    assert completion.id == "chatcmpl-9" and completion.model == "gpt-4o-2025"
    (choice,) = completion.choices
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me look that up."
    (call,) = choice.message.tool_calls or []
    assert call.type == "function" and call.id == "call_7"
    assert call.function.name == "lookup_order"
    assert json.loads(call.function.arguments) == ARGS
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (120, 17)
    assert completion.usage.total_tokens == 137
    assert completion.usage.prompt_tokens_details is not None
    assert completion.usage.prompt_tokens_details.cached_tokens == 100


def test_openai_chat_stream() -> None:
    made = synthesize("openai.chat_completions", span("gpt-4o", "chatcmpl-9", "tool_calls"), True)
    with openai_client(made) as client:
        chunks = list(
            client.chat.completions.create(
                **CHAT_PARAMS, stream=True, stream_options={"include_usage": True}
            )
        )
        # The SDK's accumulating helper must agree with the non-streamed answer.
        with client.chat.completions.stream(**CHAT_PARAMS) as stream:
            final = stream.get_final_completion()
    assert {chunk.id for chunk in chunks} == {"chatcmpl-9"}
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Let me look that up."
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "tool_calls" and set(finishes[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 17
    (choice,) = final.choices
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me look that up."
    (call,) = choice.message.tool_calls or []
    assert call.id == "call_7" and call.function.name == "lookup_order"
    assert json.loads(call.function.arguments) == ARGS
    assert final.usage is not None and final.usage.prompt_tokens == 120


def test_openai_chat_stream_async() -> None:
    made = synthesize("openai.chat_completions", span("gpt-4o", "chatcmpl-9", "stop"), True)

    async def run() -> list[Any]:
        http = httpx2.AsyncClient(transport=transport(made, asynchronous=True))
        async with openai.AsyncOpenAI(api_key=KEY, http_client=http, max_retries=0) as client:
            stream = await client.chat.completions.create(**CHAT_PARAMS, stream=True)
            return [chunk async for chunk in stream]

    chunks = asyncio.run(run())
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


RESPONSES_PARAMS: dict[str, Any] = {"model": "gpt-4.1", "input": "Where is my order A-1234?"}


def _assert_response(response: Any) -> None:
    assert response.id == "resp_5" and response.model == "gpt-4.1-2025"
    assert response.status == "completed"
    assert response.output_text == "Let me look that up."
    message, call = response.output
    assert message.type == "message" and message.role == "assistant"
    assert call.type == "function_call" and call.call_id == "call_7"
    assert call.name == "lookup_order" and json.loads(call.arguments) == ARGS
    assert response.usage.input_tokens == 120 and response.usage.output_tokens == 17
    assert response.usage.input_tokens_details.cached_tokens == 100
    assert response.usage.output_tokens_details.reasoning_tokens == 0


def test_openai_response() -> None:
    made = synthesize("openai.responses", span("gpt-4.1", "resp_5", "tool_call"), False)
    with openai_client(made) as client:
        _assert_response(client.responses.create(**RESPONSES_PARAMS))


def test_openai_response_stream() -> None:
    made = synthesize("openai.responses", span("gpt-4.1", "resp_5", "tool_call"), True)
    with openai_client(made) as client:
        events = list(client.responses.create(**RESPONSES_PARAMS, stream=True))
        with client.responses.stream(**RESPONSES_PARAMS) as stream:
            final = stream.get_final_response()
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [event.sequence_number for event in events] == list(range(len(events)))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "Let me look that up."
    arguments = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert json.loads("".join(arguments)) == ARGS
    _assert_response(events[-1].response)
    _assert_response(final)


def test_openai_response_cut_by_max_tokens() -> None:
    attrs = span("gpt-4.1", "resp_5", "length")
    with openai_client(synthesize("openai.responses", attrs, False)) as client:
        response = client.responses.create(**RESPONSES_PARAMS)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"


ANTHROPIC_PARAMS: dict[str, Any] = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 300,
    "messages": [{"role": "user", "content": "Where is my order A-1234?"}],
}


def _assert_message(message: Any) -> None:
    assert message.id == "msg_3" and message.model == "claude-sonnet-4-6-2025"
    assert message.stop_reason == "tool_use" and message.role == "assistant"
    text, tool = message.content
    assert text.type == "text" and text.text == "Let me look that up."
    assert tool.type == "tool_use" and tool.id == "call_7" and tool.name == "lookup_order"
    assert tool.input == ARGS
    # gen_ai.usage.input_tokens counts cached tokens too; Anthropic's input_tokens does not.
    assert message.usage.input_tokens == 20
    assert message.usage.cache_read_input_tokens == 100
    assert message.usage.output_tokens == 17


def test_anthropic_message() -> None:
    attrs = span("claude-sonnet-4-6", "msg_3", "tool_use")
    with anthropic_client(synthesize("anthropic.messages", attrs, False)) as client:
        _assert_message(client.messages.create(**ANTHROPIC_PARAMS))


@pytest.mark.parametrize("finish", ["tool_use", "tool_call"], ids=["wire", "schema"])
def test_anthropic_stream(finish: str) -> None:
    attrs = span("claude-sonnet-4-6", "msg_3", finish)
    made = synthesize("anthropic.messages", attrs, True)
    with anthropic_client(made) as client:
        events = list(client.messages.create(**ANTHROPIC_PARAMS, stream=True))
        with client.messages.stream(**ANTHROPIC_PARAMS) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
    kinds = [event.type for event in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert text == "Let me look that up."
    _assert_message(final)
