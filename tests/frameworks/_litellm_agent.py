"""An order-desk agent on LiteLLM: ``completion`` and ``acompletion`` with tools (LiteLLM runs
no tools: the agent does, through ``@otel_replay.tool`` functions), a streamed answer, and a
model that refuses the first attempt of each request with a 429 (``num_retries``).

    python _litellm_agent.py orders.sqlite [otel]

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
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Get an order's status, item and total.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "refund_order",
            "description": "Refund an order in full.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}, "reason": {"type": "string"}},
                "required": ["order_id", "reason"],
            },
        },
    },
]


@otel_replay.tool(effect="read")
def lookup_order(order_id: str) -> dict[str, Any]:
    return lookup(DB, order_id)


@otel_replay.tool(effect="write")
def refund_order(order_id: str, reason: str) -> dict[str, Any]:
    return refund(DB, order_id, reason)


FUNCTIONS = {"lookup_order": lookup_order, "refund_order": refund_order}


def answer(messages: list[dict[str, Any]], response: Any) -> str | None:
    """Run the tools the model asked for (their results appended to ``messages``); the
    model's text when it asked for none."""
    message = response.choices[0].message
    if not message.tool_calls:
        return str(message.content)
    messages.append(message.model_dump())
    for call in message.tool_calls:
        result = FUNCTIONS[call.function.name](**json.loads(call.function.arguments))
        print(f"  [tool] {call.function.name} -> {json.dumps(result)}")
        messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
    return None


def turn(question: str, model: str, **options: Any) -> str:
    messages = [{"role": "system", "content": os.environ.get("AGENT_SYSTEM", SYSTEM)}]
    messages.append({"role": "user", "content": question})
    while True:
        response = litellm.completion(model, messages, tools=TOOLS, **PROVIDER, **options)
        text = answer(messages, response)
        if text is not None:
            return text


async def aturn(question: str) -> str:
    messages = [{"role": "system", "content": os.environ.get("AGENT_SYSTEM", SYSTEM)}]
    messages.append({"role": "user", "content": question})
    while True:
        response = await litellm.acompletion(
            "openai/gpt-4o-mini", messages, tools=TOOLS, **PROVIDER
        )
        text = answer(messages, response)
        if text is not None:
            return text


def streamed(question: str) -> str:
    chunks = litellm.completion(
        "openai/gpt-4o-mini", [{"role": "user", "content": question}], stream=True, **PROVIDER
    )
    return "".join(chunk.choices[0].delta.content or "" for chunk in chunks)


def main() -> None:
    print(f"customer> {QUESTIONS[0]}")
    print(f"agent> {turn(QUESTIONS[0], 'openai/gpt-4o-mini')}")
    print(f"customer> {QUESTIONS[1]}")
    print(f"agent> {asyncio.run(aturn(QUESTIONS[1]))}")
    print(f"agent (streamed)> {streamed('Hello, what can you do?')}")
    # The stand-in refuses each new request once with a 429: LiteLLM retries it.
    print(f"agent (retried)> {turn(QUESTIONS[0], 'openai/standin-flaky', num_retries=2)}")


if __name__ == "__main__":
    main()
