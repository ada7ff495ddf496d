"""An order-desk agent in the OpenAI Agents SDK, run the ways its users reach for past
``Runner.run``: streamed, handing off, and calling tools in parallel. Its tools are plain
``@function_tool`` functions with no otel-replay code.

    python _agents_streaming_agent.py orders.sqlite chat|responses [bridge]

- ``Runner.run_streamed`` on the desk (a lookup, then a refund: the write), its
  ``stream_events()`` consumed: text deltas, tool calls and outputs printed as they come;
- a triage agent (model ``standin-triage``) handing off to the desk, which runs the lookup
  (``remove_all_tools`` as the handoff's input filter, so the desk sees the question only),
  streamed as well;
- ``Runner.run`` (async) on a desk that also has ``get_weather``: the model asks for the
  lookup and the weather in one turn, and the SDK runs both at once.

The SDK's own tracing is off (it would upload to OpenAI), unless ``bridge``: then its spans go
to OpenTelemetry only, through the official ``opentelemetry-instrumentation-openai-agents-v2``.

Environment: STANDIN_URL, the stand-in model provider; AGENT_SYSTEM, a system prompt other
than the recorded one.
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
    handoff,
    set_trace_processors,
    set_tracing_disabled,
)
from agents.extensions.handoff_filters import remove_all_tools
from openai import AsyncOpenAI
from openai.types.responses import ResponseTextDeltaEvent

from tests.frameworks._orders import QUESTIONS, SYSTEM, lookup, open_database, refund

DB = open_database(sys.argv[1])
API = sys.argv[2]
BRIDGE = "bridge" in sys.argv[3:]
BOTH = "Where is my order A-1234, and what is the weather in Paris?"


class Refund(pydantic.BaseModel):
    refund_id: str
    order_id: str
    amount: float
    currency: str
    status: str


@function_tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Get an order's status, item and total."""
    return lookup(DB, order_id)


@function_tool
async def refund_order(order_id: str, reason: str) -> Refund:
    """Refund an order in full."""
    return Refund(**refund(DB, order_id, reason))


@function_tool
async def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city now."""
    await asyncio.sleep(0.05)  # the lookup runs meanwhile
    return {"city": city, "temperature_c": 21, "conditions": "sunny"}


def model(name: str = "gpt-4o-mini") -> Any:
    base = os.environ.get("STANDIN_URL", "http://127.0.0.1:8765").rstrip("/")
    client = AsyncOpenAI(base_url=f"{base}/v1", api_key="sk-standin-not-a-secret")
    if API == "responses":
        return OpenAIResponsesModel(model=name, openai_client=client)
    return OpenAIChatCompletionsModel(model=name, openai_client=client)


SYSTEM_NOW = os.environ.get("AGENT_SYSTEM", SYSTEM)
desk = Agent(
    name="desk", instructions=SYSTEM_NOW, tools=[lookup_order, refund_order], model=model()
)
triage = Agent(
    name="triage",
    instructions="Route the customer to the right desk.",
    handoffs=[handoff(desk, input_filter=remove_all_tools)],
    model=model("standin-triage"),
)
weather_desk = Agent(
    name="weather_desk",
    instructions=SYSTEM_NOW,
    tools=[lookup_order, get_weather],
    model=model(),
)


async def streamed(agent: Agent[Any], asked: Any) -> Any:
    """Run ``agent`` streamed, printing what it streams; returns the streaming result."""
    result = Runner.run_streamed(agent, asked)
    text: list[str] = []
    async for event in result.stream_events():
        if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
            text.append(event.data.delta)
        elif event.type == "agent_updated_stream_event":
            print(f"  [agent] {event.new_agent.name}")
        elif event.type == "run_item_stream_event" and event.name == "tool_called":
            print(f"  [call] {event.item.raw_item.name} {event.item.raw_item.arguments}")
        elif event.type == "run_item_stream_event" and event.name == "tool_output":
            print(f"  [tool] -> {event.item.output}")
    print(f"agent (streamed)> {''.join(text)}")
    assert "".join(text) == result.final_output, (text, result.final_output)
    return result


async def main() -> None:
    if BRIDGE:
        from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        set_trace_processors([])  # no upload to OpenAI: OpenTelemetry only
        OpenAIAgentsInstrumentor().instrument()
    else:
        set_tracing_disabled(True)  # no upload to OpenAI
    history: list[Any] = []
    for question in QUESTIONS:
        print(f"customer> {question}")
        result = await streamed(desk, [*history, {"role": "user", "content": question}])
        history = result.to_input_list()

    print(f"customer (triage)> {QUESTIONS[0]}")
    handed = await streamed(triage, QUESTIONS[0])
    print(f"  [last agent] {handed.last_agent.name}")

    print(f"customer> {BOTH}")
    both = await Runner.run(weather_desk, BOTH)
    for item in both.new_items:
        if item.type == "tool_call_output_item":
            print(f"  [tool] -> {item.output}")
    print(f"agent> {both.final_output}")


if __name__ == "__main__":
    asyncio.run(main())
