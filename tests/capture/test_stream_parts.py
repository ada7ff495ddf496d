"""A streamed answer records the same ``gen_ai.output.messages`` parts as the same answer
unstreamed: no empty text part beside a tool call (a stream opens its text with ``""`` where
the unstreamed message has ``null``, or no text block at all)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from examples.standin import StandIn
from otel_replay.codecs.anthropic_messages import ANTHROPIC_MESSAGES
from otel_replay.codecs.openai_chat import OPENAI_CHAT
from otel_replay.testing import CaptureKit
from tests.test_codec_anthropic import (
    MESSAGE_STOP,
    block_start,
    block_stop,
    delta,
    message,
    message_delta,
    message_start,
    stream_back,
)
from tests.test_codec_anthropic import sse as anthropic_sse
from tests.test_codec_openai import sse as openai_sse

KEY = "sk-stream-parts-not-a-secret"
QUESTION = [{"role": "user", "content": "Where is my order A-1234?"}]
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look an order up.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    }
]


def _shape(messages: list[dict[str, Any]]) -> list[list[tuple[str, Any]]]:
    """Each message's parts as (type, content or tool name and arguments), ids left out."""
    return [
        [
            (part["type"], part.get("content", (part.get("name"), part.get("arguments"))))
            for part in message["parts"]
        ]
        for message in messages
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_openai_tool_call_has_no_empty_text_part(standin: StandIn, stream: bool) -> None:
    with CaptureKit() as kit:
        client = openai.OpenAI(base_url=standin.openai_base_url, api_key=KEY)
        with client:
            result = client.chat.completions.create(
                model="gpt-4o-mini", messages=QUESTION, tools=OPENAI_TOOLS, stream=stream
            )
            if stream:
                list(result)
        (span,) = kit.spans()
    assert _shape(span["attributes"]["gen_ai.output.messages"]) == [
        [("tool_call", ("lookup_order", {"order_id": "A-1234"}))]
    ]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [choice]}


def test_openai_stream_parts_match_the_unstreamed_message() -> None:
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup_order", "arguments": '{"order_id": "A-1234"}'},
    }
    streamed = openai_sse(
        [
            _chunk({"role": "assistant", "content": ""}),
            _chunk({"tool_calls": [call]}),
            _chunk({}, "tool_calls"),
        ]
    )
    unstreamed = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
    }
    from_stream = OPENAI_CHAT.parse_response(200, streamed, streamed=True)
    whole = OPENAI_CHAT.parse_response(200, json.dumps(unstreamed).encode(), streamed=False)
    assert from_stream.output_messages == whole.output_messages
    assert _shape(whole.output_messages) == [
        [("tool_call", ("lookup_order", {"order_id": "A-1234"}))]
    ]


def test_openai_empty_answer_keeps_its_empty_text() -> None:
    streamed = openai_sse([_chunk({"role": "assistant", "content": ""}), _chunk({}, "stop")])
    response = OPENAI_CHAT.parse_response(200, streamed, streamed=True)
    assert _shape(response.output_messages) == [[("text", "")]]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_anthropic_tool_call_parts_streamed_or_not(standin: StandIn, stream: bool) -> None:
    tools = [{"name": "lookup_order", "input_schema": {"type": "object"}}]
    with CaptureKit() as kit:
        client = anthropic.Anthropic(
            base_url=standin.anthropic_base_url, api_key=KEY, open_telemetry=False
        )
        with client:
            request: dict[str, Any] = {
                "model": "claude-sonnet-4-6",
                "max_tokens": 200,
                "messages": QUESTION,
                "tools": tools,
            }
            if stream:
                with client.messages.stream(**request) as events:
                    events.until_done()
            else:
                client.messages.create(**request)
        (span,) = kit.spans()
    (parts,) = _shape(span["attributes"]["gen_ai.output.messages"])
    # The stand-in narrates before its tool call or not, as a model does.
    assert parts[-1] == ("tool_call", ("lookup_order", {"order_id": "A-1234"}))
    assert all(content for kind, content in parts[:-1] if kind == "text")


TOOL_USE = {"type": "tool_use", "id": "toolu_01A", "name": "lookup_order", "input": {}}


def test_anthropic_stream_drops_a_text_block_left_empty() -> None:
    events = [
        message_start(input_tokens=30, output_tokens=1),
        block_start(0, {"type": "text", "text": ""}),
        block_stop(0),
        block_start(1, TOOL_USE),
        delta(1, type="input_json_delta", partial_json='{"order_id": "A-1234"}'),
        block_stop(1),
        message_delta("tool_use", output_tokens=12),
        MESSAGE_STOP,
    ]
    # The SDK reads the stream as we feed it: the events are ones it accepts.
    assert [block.type for block in stream_back(events).content] == ["text", "tool_use"]
    streamed = ANTHROPIC_MESSAGES.parse_response(200, anthropic_sse(*events), streamed=True)
    called = {**TOOL_USE, "input": {"order_id": "A-1234"}}
    body = json.dumps(message([called], "tool_use", input_tokens=30, output_tokens=12)).encode()
    unstreamed = ANTHROPIC_MESSAGES.parse_response(200, body, streamed=False)
    assert streamed.output_messages == unstreamed.output_messages
    assert _shape(streamed.output_messages) == [
        [("tool_call", ("lookup_order", {"order_id": "A-1234"}))]
    ]


def test_anthropic_stream_of_an_empty_answer_keeps_one_text_part() -> None:
    events = [
        message_start(input_tokens=30, output_tokens=1),
        block_start(0, {"type": "text", "text": ""}),
        block_stop(0),
        message_delta("end_turn", output_tokens=1),
        MESSAGE_STOP,
    ]
    response = ANTHROPIC_MESSAGES.parse_response(200, anthropic_sse(*events), streamed=True)
    assert _shape(response.output_messages) == [[("text", "")]]
