"""An order-desk agent in LangGraph: a ChatOpenAI node and a ToolNode, its tools plain
LangChain ``@tool`` functions with no otel-replay code.

The first question runs the graph synchronously (``lookup_order``, a sync tool, through
``ToolNode`` and ``tool.invoke``), the second asynchronously (``refund_order``, an async tool,
through ``tool.ainvoke``).

    python _langgraph_agent.py orders.sqlite [REFUND_TOOL]

REFUND_TOOL names the refund tool (default ``refund_order``; the stand-in also calls
``issue_refund``).

Environment: STANDIN_URL, the stand-in model provider.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool

from tests.frameworks._langgraph_graph import tool_loop
from tests.frameworks._orders import QUESTIONS, SYSTEM, lookup, open_database, refund

DB = open_database(sys.argv[1])


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Get an order's status, item and total."""
    return lookup(DB, order_id)


async def refund_order(order_id: str, reason: str) -> dict[str, Any]:
    """Refund an order in full."""
    return refund(DB, order_id, reason)


refund_tool = tool(sys.argv[2] if len(sys.argv) > 2 else "refund_order")(refund_order)


TOOLS = [lookup_order, refund_tool]


def main() -> None:
    graph = tool_loop(TOOLS)
    messages: list[AnyMessage] = [SystemMessage(SYSTEM)]
    for turn, question in enumerate(QUESTIONS):
        print(f"customer> {question}")
        state = {"messages": [*messages, HumanMessage(question)]}
        result = graph.invoke(state) if turn == 0 else asyncio.run(graph.ainvoke(state))
        messages = result["messages"]
        for message in messages[-3:-1]:
            if message.type == "tool":
                print(f"  [tool] {message.name} -> {message.content}")
        print(f"agent> {messages[-1].content}")


if __name__ == "__main__":
    main()
