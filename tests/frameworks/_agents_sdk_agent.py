"""An order-desk agent in the OpenAI Agents SDK, its tools plain ``@function_tool`` functions
with no otel-replay code.

    python _agents_sdk_agent.py orders.sqlite chat|responses [bridge] [failing] [session]

``chat`` runs the model over Chat Completions, ``responses`` over the Responses API. The SDK's
own tracing is off (it would upload to OpenAI), unless ``bridge``: then its spans go to
OpenTelemetry only, through the official ``opentelemetry-instrumentation-openai-agents-v2``.
With ``failing`` the lookup raises (its warehouse is offline) and the SDK's failure handler
makes the error the tool's output: the lookup declares a structured output, which that text
bypasses, and the run's ``tool_error_formatter`` (application code) words the message.
With ``session`` the conversation is kept by a ``SQLiteSession`` on a file beside the
database that outlives the program, as a deployed agent's is: each run asks only its
questions, a run on a session the file already holds goes on where the last one ended.

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
    RunConfig,
    Runner,
    SQLiteSession,
    ToolErrorFormatterArgs,
    function_tool,
    set_trace_processors,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from tests.frameworks._orders import QUESTIONS, SYSTEM, lookup, open_database, refund

DB = open_database(sys.argv[1])
API = sys.argv[2]
BRIDGE = "bridge" in sys.argv[3:]
FAILING = "failing" in sys.argv[3:]
SESSION = "session" in sys.argv[3:]


class Refund(pydantic.BaseModel):
    refund_id: str
    order_id: str
    amount: float
    currency: str
    status: str


class Order(pydantic.BaseModel):
    order_id: str
    status: str
    total: float


@function_tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Get an order's status, item and total."""
    return lookup(DB, order_id)  # the SDK shows the model str() of the dict


class WarehouseOffline(LookupError):
    """The failing lookup's own exception (a replay raises this class again)."""


@function_tool(name_override="lookup_order", output_type=Order)
def lookup_order_offline(order_id: str) -> Order:
    """Get an order's status, item and total."""
    raise WarehouseOffline(f"the warehouse holding {order_id} is offline")


def word_the_failure(args: ToolErrorFormatterArgs[Any]) -> str | None:
    """The application's wording of a tool failure for the model (it runs in a replay too)."""
    if args.kind != "tool_exception":
        return None
    print(f"  [failure] {args.tool_name}: {type(args.error).__name__}: {args.error}")
    return f"{args.tool_name} failed: {args.error}"


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
    tools = [lookup_order_offline if FAILING else lookup_order, refund_order]
    agent = Agent(name="desk", instructions=SYSTEM, tools=tools, model=model())
    config = RunConfig(tool_error_formatter=word_the_failure)
    session = SQLiteSession("desk-7", sys.argv[1] + ".sessions") if SESSION else None
    history: list[Any] = []
    for question in QUESTIONS:
        print(f"customer> {question}")
        asked = [*history, {"role": "user", "content": question}]
        result = await Runner.run(agent, asked, run_config=config, session=session)
        for item in result.new_items:
            if item.type == "tool_call_output_item":
                print(f"  [tool] -> {item.output}")
        print(f"agent> {result.final_output}")
        history = [] if session else result.to_input_list()
    if session is not None:
        print(f"[session] {len(await session.get_items())} items")


if __name__ == "__main__":
    asyncio.run(main())
