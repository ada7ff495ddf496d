"""An order-desk agent in LangGraph whose caller streams the graph instead of invoking it:
``stream(..., stream_mode="updates")`` for the first question (each node's update printed as
it comes), ``astream(..., stream_mode="messages")`` for the second (the model's answer printed
token by token, ChatOpenAI streaming because LangGraph asks it to), and ``astream`` with both
modes at once for a third. Plain LangChain ``@tool`` functions, no otel-replay code.

    python _langgraph_stream_agent.py orders.sqlite

Environment: STANDIN_URL, the stand-in model provider; AGENT_SYSTEM, the system prompt.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from tests.frameworks._langgraph_graph import chat_model
from tests.frameworks._orders import QUESTIONS, SYSTEM, lookup, open_database, refund

DB = open_database(sys.argv[1])


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Get an order's status, item and total."""
    return lookup(DB, order_id)


@tool
async def refund_order(order_id: str, reason: str) -> dict[str, Any]:
    """Refund an order in full."""
    return refund(DB, order_id, reason)


TOOLS = [lookup_order, refund_order]


def build() -> Any:
    model = chat_model(TOOLS)

    async def agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def agent_sync(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent_sync, afunc=agent)  # type: ignore[call-overload]
    graph.add_node("tools", ToolNode(TOOLS))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


def shown(message: BaseMessage) -> str:
    if message.type == "ai" and getattr(message, "tool_calls", None):
        return "calls " + ", ".join(f"{c['name']}({c['args']})" for c in message.tool_calls)
    return f"{message.type}: {message.content}"


def updates(graph: Any, state: dict[str, Any]) -> list[AnyMessage]:
    messages = list(state["messages"])
    for update in graph.stream(state, stream_mode="updates"):
        for node, change in update.items():
            for message in change["messages"]:
                print(f"  [update] {node}: {shown(message)}")
                messages.append(message)
    return messages


async def tokens(graph: Any, state: dict[str, Any]) -> None:
    async for chunk, meta in graph.astream(state, stream_mode="messages"):
        if chunk.type == "AIMessageChunk" and chunk.content:
            print(f"  [token {meta['langgraph_node']}] {chunk.content!r}")
        elif chunk.type == "tool":
            print(f"  [message {meta['langgraph_node']}] {shown(chunk)}")


async def both(graph: Any, state: dict[str, Any]) -> None:
    async for mode, data in graph.astream(state, stream_mode=["updates", "messages"]):
        if mode == "updates":
            print(f"  [update] {', '.join(data)}")
        elif data[0].content:
            print(f"  [token] {data[0].content!r}")


def main() -> None:
    graph = build()
    system = SystemMessage(os.environ.get("AGENT_SYSTEM", SYSTEM))
    first, second = QUESTIONS
    print(f"customer> {first}")
    messages = updates(graph, {"messages": [system, HumanMessage(first)]})
    print(f"customer> {second}")
    asyncio.run(tokens(graph, {"messages": [*messages, HumanMessage(second)]}))
    print("customer> Thanks, and where is order A-1234 now?")
    ask = HumanMessage("Thanks, and where is order A-1234 now?")
    asyncio.run(both(graph, {"messages": [system, ask]}))


if __name__ == "__main__":
    main()
