"""An order-desk agent in the OpenAI Agents SDK, its tools plain ``@function_tool`` functions
with no otel-replay code.

    python _agents_sdk_agent.py orders.sqlite chat|responses [bridge]

``chat`` runs the model over Chat Completions, ``responses`` over the Responses API. The SDK's
own tracing is off (it would upload to OpenAI), unless ``bridge``: then its spans go to
OpenTelemetry only, through the official ``opentelemetry-instrumentation-openai-agents-v2``.

Environment: STANDIN_URL, the stand-in model provider.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import pydantic
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_trace_processors,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from tests.frameworks._orders import QUESTIONS, SYSTEM, lookup, open_database, refund

DB = open_database(sys.argv[1])
API = sys.argv[2]
BRIDGE = sys.argv[3:] == ["bridge"]


class Refund(pydantic.BaseModel):
    refund_id: str
    order_id: str
    amount: float
    currency: str
    status: str


@function_tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Get an order's status, item and total."""
    return lookup(DB, order_id)  # the SDK shows the model str() of the dict


@function_tool
async def refund_order(order_id: str, reason: str) -> Refund:
    """Refund an order in full."""
    return Refund(**refund(DB, order_id, reason))  # and str() of the model


def model() -> Any:
    base = os.environ.get("STANDIN_URL", "http://127.0.0.1:8765").rstrip("/")
    client = AsyncOpenAI(base_url=f"{base}/v1", api_key="sk-standin-not-a-secret")
    if API == "responses":
        return OpenAIResponsesModel(model="gpt-4o-mini", openai_client=client)
    return OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)


async def main() -> None:
    if BRIDGE:
        from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        set_trace_processors([])  # no upload to OpenAI: OpenTelemetry only
        OpenAIAgentsInstrumentor().instrument()
    else:
        set_tracing_disabled(True)
    tools = [lookup_order, refund_order]
    agent = Agent(name="desk", instructions=SYSTEM, tools=tools, model=model())
    history: list[Any] = []
    for question in QUESTIONS:
        print(f"customer> {question}")
        result = await Runner.run(agent, [*history, {"role": "user", "content": question}])
        for item in result.new_items:
            if item.type == "tool_call_output_item":
                print(f"  [tool] -> {item.output}")
        print(f"agent> {result.final_output}")
        history = result.to_input_list()


if __name__ == "__main__":
    asyncio.run(main())
