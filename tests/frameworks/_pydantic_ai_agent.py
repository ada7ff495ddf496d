"""An order-desk agent in Pydantic AI, its tools plain ``@agent.tool_plain``/``@agent.tool``
functions with no otel-replay code.

    python _pydantic_ai_agent.py orders.sqlite [instrumented]

The first question runs with ``run_sync`` (``lookup_order``, a sync tool Pydantic AI runs in a
worker thread), the second with ``run`` under asyncio (``refund_order``, an async tool taking
the run context and returning a pydantic model), the third streams with ``run_stream``.
``instrumented`` turns Pydantic AI's own OpenTelemetry instrumentation on
(``Agent.instrument_all()``): its ``chat`` and ``execute_tool`` spans.

Environment: STANDIN_URL, the stand-in model provider; AGENT_SYSTEM, a system prompt other
than the recorded one.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import pydantic
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ToolReturnPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tests.frameworks._orders import QUESTIONS, SYSTEM, lookup, open_database, refund

DB = open_database(sys.argv[1])
if sys.argv[2:] == ["instrumented"]:
    Agent.instrument_all()


class Refund(pydantic.BaseModel):
    refund_id: str
    order_id: str
    amount: float
    currency: str
    status: str


base = os.environ.get("STANDIN_URL", "http://127.0.0.1:8765").rstrip("/")
agent = Agent(
    OpenAIChatModel(
        "gpt-4o-mini",
        provider=OpenAIProvider(base_url=f"{base}/v1", api_key="sk-standin-not-a-secret"),
    ),
    system_prompt=os.environ.get("AGENT_SYSTEM", SYSTEM),
)


@agent.tool_plain
def lookup_order(order_id: str) -> dict[str, Any]:
    """Get an order's status, item and total."""
    return lookup(DB, order_id)


@agent.tool
async def refund_order(ctx: RunContext[None], order_id: str, reason: str) -> Refund:
    """Refund an order in full."""
    return Refund(**refund(DB, order_id, reason))


def show(messages: list[Any]) -> None:
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                # The class shows that replay gave back the object the tool returned.
                kind = type(part.content).__name__
                print(f"  [tool] {part.tool_name} -> {kind} {part.model_response_str()}")


async def streamed(question: str) -> None:
    async with agent.run_stream(question) as stream:
        text = "".join([chunk async for chunk in stream.stream_text(delta=True)])
        show(stream.new_messages())
    print(f"agent (streamed)> {text}")


def main() -> None:
    print(f"customer> {QUESTIONS[0]}")
    first = agent.run_sync(QUESTIONS[0])
    show(first.new_messages())
    print(f"agent> {first.output}")
    print(f"customer> {QUESTIONS[1]}")
    second = asyncio.run(agent.run(QUESTIONS[1], message_history=first.all_messages()))
    show(second.new_messages())
    print(f"agent> {second.output}")
    asyncio.run(streamed(QUESTIONS[0]))


if __name__ == "__main__":
    main()
