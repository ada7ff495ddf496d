"""An order-desk agent on LiteLLM that streams every answer, tool calls included: the
tool-call deltas are put back together with ``litellm.stream_chunk_builder`` and the tools run
through ``@otel_replay.tool`` functions (LiteLLM runs no tools).

    python _litellm_streaming_agent.py orders.sqlite [otel]

The lookup runs over ``litellm.completion(..., stream=True)`` (sync), the refund (the write)
over ``await litellm.acompletion(..., stream=True)``, each printing the text as it streams.
``otel`` turns LiteLLM's OpenTelemetry callback on (``litellm.callbacks = ["otel"]``).

Environment: STANDIN_URL, the stand-in model provider; AGENT_SYSTEM, a system prompt other
than the recorded one.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import litellm

import otel_replay
from tests.frameworks._orders import QUESTIONS, SYSTEM, lookup, open_database, refund

DB = open_database(sys.argv[1])
if sys.argv[2:] == ["otel"]:
    litellm.callbacks = ["otel"]
BASE = os.environ.get("STANDIN_URL", "http://127.0.0.1:8765").rstrip("/")
PROVIDER = {"api_base": f"{BASE}/v1", "api_key": "sk-standin-not-a-secret"}


def function(name: str, description: str, **properties: Any) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "required": [*properties]}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


TOOLS = [
    function("lookup_order", "Get an order's status, item and total.", order_id={"type": "string"}),
    function(
        "refund_order",
        "Refund an order in full.",
        order_id={"type": "string"},
        reason={"type": "string"},
    ),
]
OPTIONS = {"tools": TOOLS, "stream": True, "stream_options": {"include_usage": True}}


@otel_replay.tool(effect="read")
def lookup_order(order_id: str) -> dict[str, Any]:
    return lookup(DB, order_id)


@otel_replay.tool(effect="write")
def refund_order(order_id: str, reason: str) -> dict[str, Any]:
    return refund(DB, order_id, reason)


FUNCTIONS = {"lookup_order": lookup_order, "refund_order": refund_order}


def answer(messages: list[dict[str, Any]], chunks: list[Any]) -> str | None:
    """The streamed ``chunks`` put together: run the tools the model asked for (their
    results appended to ``messages``); the model's text when it asked for none."""
    response = litellm.stream_chunk_builder(chunks, messages=messages)
    message = response.choices[0].message
    if not message.tool_calls:
        return str(message.content)
    messages.append(message.model_dump())
    for call in message.tool_calls:
        result = FUNCTIONS[call.function.name](**json.loads(call.function.arguments))
        print(f"  [tool] {call.function.name} -> {json.dumps(result)}")
        messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
    return None


def streamed_text(chunks: list[Any]) -> None:
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    if text:
        print(f"  [streamed] {text}")


def opening(question: str) -> list[dict[str, Any]]:
    system = os.environ.get("AGENT_SYSTEM", SYSTEM)
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def turn(question: str) -> str:
    messages = opening(question)
    while True:
        stream = litellm.completion("openai/gpt-4o-mini", messages, **OPTIONS, **PROVIDER)
        chunks = list(stream)
        streamed_text(chunks)
        text = answer(messages, chunks)
        if text is not None:
            return text


async def aturn(question: str) -> str:
    messages = opening(question)
    while True:
        stream = await litellm.acompletion("openai/gpt-4o-mini", messages, **OPTIONS, **PROVIDER)
        chunks = [chunk async for chunk in stream]
        streamed_text(chunks)
        text = answer(messages, chunks)
        if text is not None:
            return text


def main() -> None:
    print(f"customer> {QUESTIONS[0]}")
    print(f"agent> {turn(QUESTIONS[0])}")
    print(f"customer> {QUESTIONS[1]}")
    print(f"agent> {asyncio.run(aturn(QUESTIONS[1]))}")


if __name__ == "__main__":
    main()
