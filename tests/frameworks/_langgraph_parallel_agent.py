"""An order-desk agent in LangGraph whose model asks for several tools in one turn, run at
once by ``ToolNode``: sync tools in its thread pool (``invoke``), async ones gathered
(``ainvoke``). Plain LangChain ``@tool`` functions, no otel-replay code.

The first question asks for two orders and the weather in two cities (four sync calls, each
sleeping a random moment, so they finish in an order of their own); the second for a refund
(an async tool) and the weather again (a sync one, run in an executor beside it). The
weather is a live reading: different on every call.

    python _langgraph_parallel_agent.py orders.sqlite

Environment: STANDIN_URL, the stand-in model provider; AGENT_SYSTEM, the system prompt.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool

from tests.frameworks._langgraph_graph import tool_loop
from tests.frameworks._orders import SYSTEM, lookup, open_database, refund

DB = open_database(sys.argv[1])
DB.execute("INSERT OR IGNORE INTO orders VALUES ('B-5678', 'processing', 35.5, 'EUR', 'mouse')")
DB.commit()
QUESTIONS = (
    "Where are my orders A-1234 and B-5678? And what is the weather in Paris and Tokyo?",
    "It arrived broken, please refund order A-1234. And the weather in Paris now?",
)
# Two customers at once, each asking about their order and the weather in the same city: the
# two get_weather calls have the same arguments and different answers.
AT_ONCE = (
    "Where is order A-1234, and what is the weather in Paris?",
    "Where is order B-5678, and what is the weather in Paris?",
)
_live = random.SystemRandom()


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Get an order's status, item and total."""
    time.sleep(_live.random() / 50)
    return lookup(DB, order_id)


@tool
def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city now."""
    time.sleep(_live.random() / 50)
    return {"city": city, "temperature_c": _live.randint(-5, 35), "conditions": "windy"}


@tool
async def refund_order(order_id: str, reason: str) -> dict[str, Any]:
    """Refund an order in full."""
    await asyncio.sleep(_live.random() / 50)
    return refund(DB, order_id, reason)


TOOLS = [lookup_order, get_weather, refund_order]


class Jitter(BaseCallbackHandler):
    """A tracing callback that takes a moment of its own before each tool runs (as one
    that writes to a file or a queue does), so the tools of one turn reach their bodies in
    an order of their own, when recorded and on every replay."""

    run_inline = False

    def on_tool_start(self, *args: Any, **kwargs: Any) -> None:
        time.sleep(_live.random() / 50)


def main() -> None:
    graph = tool_loop(TOOLS)
    messages: list[AnyMessage] = [SystemMessage(os.environ.get("AGENT_SYSTEM", SYSTEM))]
    for turn, question in enumerate(QUESTIONS):
        print(f"customer> {question}")
        state = {"messages": [*messages, HumanMessage(question)]}
        config: Any = {"callbacks": [Jitter()]}
        if turn == 0:
            result = graph.invoke(state, config)
        else:
            result = asyncio.run(graph.ainvoke(state, config))
        asked = len(messages) + 1
        messages = result["messages"]
        for message in messages[asked:]:
            if message.type == "ai" and message.tool_calls:
                print(f"  [asked] {', '.join(call['name'] for call in message.tool_calls)}")
            elif message.type == "tool":
                print(f"  [tool] {message.tool_call_id} {message.name} -> {message.content}")
        print(f"agent> {messages[-1].content}")
    asyncio.run(customers(graph))


async def customers(graph: Any) -> None:
    """Both customers' questions at once, each on a graph run of its own."""
    system = SystemMessage(os.environ.get("AGENT_SYSTEM", SYSTEM))
    config: Any = {"callbacks": [Jitter()]}
    results = await asyncio.gather(
        *(graph.ainvoke({"messages": [system, HumanMessage(q)]}, config) for q in AT_ONCE)
    )
    for question, result in zip(AT_ONCE, results, strict=True):
        print(f"customer> {question}")
        for message in result["messages"][2:-1]:
            if message.type == "tool":
                print(f"  [tool] {message.tool_call_id} {message.name} -> {message.content}")
        print(f"agent> {result['messages'][-1].content}")


if __name__ == "__main__":
    main()
