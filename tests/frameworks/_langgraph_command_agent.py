"""An order-desk agent in LangGraph whose tools update the graph's state and route it by
returning ``Command(update=..., goto=...)``, as LangGraph's docs show, with no otel-replay
code.

``lookup_order`` (sync, run by ``invoke``) puts the order's status in the state and sends
the graph back to the model; ``refund_order`` (async, run by ``ainvoke``) puts the refund id
in the state and sends the graph to a ``receipt`` node first, which reads it from there.
The tools have no edge out of them: where the graph goes after a tool is the tool's word.

    python _langgraph_command_agent.py orders.sqlite

Environment: STANDIN_URL, the stand-in model provider; AGENT_SYSTEM, the system prompt.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Annotated, Any

from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from tests.frameworks._langgraph_graph import chat_model
from tests.frameworks._orders import QUESTIONS, SYSTEM, lookup, open_database, refund

DB = open_database(sys.argv[1])


class DeskState(MessagesState):
    order_status: str | None
    refund_id: str | None
    receipts: list[str]


@tool
def lookup_order(order_id: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
    """Get an order's status, item and total."""
    order = lookup(DB, order_id)
    return Command(
        update={
            "order_status": order["status"],
            "messages": [ToolMessage(json.dumps(order), tool_call_id=tool_call_id)],
        },
        goto="agent",
    )


@tool
async def refund_order(
    order_id: str, reason: str, tool_call_id: Annotated[str, InjectedToolCallId]
) -> Command:
    """Refund an order in full."""
    receipt = refund(DB, order_id, reason)
    return Command(
        update={
            "refund_id": receipt["refund_id"],
            "messages": [ToolMessage(json.dumps(receipt), tool_call_id=tool_call_id)],
        },
        goto="receipt",
    )


TOOLS = [lookup_order, refund_order]


def build() -> Any:
    model = chat_model(TOOLS)

    def agent(state: DeskState) -> dict[str, list[AnyMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    def receipt(state: DeskState) -> dict[str, list[str]]:
        return {"receipts": [*state.get("receipts", []), f"receipt for {state['refund_id']}"]}

    graph = StateGraph(DeskState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(TOOLS), destinations=("agent", "receipt"))
    graph.add_node("receipt", receipt)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("receipt", "agent")
    return graph.compile()


def main() -> None:
    graph = build()
    messages: list[AnyMessage] = [SystemMessage(os.environ.get("AGENT_SYSTEM", SYSTEM))]
    for turn, question in enumerate(QUESTIONS):
        print(f"customer> {question}")
        state = {"messages": [*messages, HumanMessage(question)], "receipts": []}
        result = graph.invoke(state) if turn == 0 else asyncio.run(graph.ainvoke(state))
        messages = result["messages"]
        for message in messages[-3:-1]:
            if message.type == "tool":
                print(f"  [tool] {message.name} -> {message.content}")
        print(f"  [state] order_status={result.get('order_status')!r}", end=" ")
        print(f"refund_id={result.get('refund_id')!r} receipts={result.get('receipts')!r}")
        print(f"agent> {messages[-1].content}")


if __name__ == "__main__":
    main()
