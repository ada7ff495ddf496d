"""An order-desk agent in LangGraph with a human in the loop: ``interrupt()`` pauses the graph,
``Command(resume=...)`` resumes it in the same process, a ``MemorySaver`` keeping its state.

The refund is asked for twice: a ``review`` node between the model and the ``ToolNode``
interrupts with the tool calls the model made, and the ``refund_order`` tool itself interrupts
for the amount to refund before it writes. Each pause is printed, and answered by its
interrupt's id (``Command(resume={id: answer})``).

    python _langgraph_hitl_agent.py orders.sqlite

Environment: STANDIN_URL, the stand-in model provider.
"""

from __future__ import annotations

import sys
from typing import Any, Literal

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt

from tests.frameworks._langgraph_graph import chat_model
from tests.frameworks._orders import QUESTIONS, SYSTEM, lookup, open_database, refund

DB = open_database(sys.argv[1])


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Get an order's status, item and total."""
    return lookup(DB, order_id)


@tool
def refund_order(order_id: str, reason: str) -> dict[str, Any]:
    """Refund an order in full, once a human confirmed the amount."""
    order = lookup(DB, order_id)
    answer = interrupt({"confirm_refund": order_id, "amount": order["total"]})
    if not answer.get("confirmed"):
        return {"order_id": order_id, "status": "not refunded"}
    return refund(DB, order_id, reason)


TOOLS = [lookup_order, refund_order]


def build() -> Any:
    model = chat_model(TOOLS)

    def agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    def review(state: MessagesState) -> Command[Literal["tools", "__end__"]]:
        last = state["messages"][-1]
        if not isinstance(last, AIMessage) or not last.tool_calls:
            return Command(goto=END)
        writes = [call["name"] for call in last.tool_calls if call["name"] == "refund_order"]
        if writes and not interrupt({"approve": writes}).get("approved"):
            return Command(goto=END)
        return Command(goto="tools")

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("review", review)
    graph.add_node("tools", ToolNode(TOOLS))
    graph.add_edge(START, "agent")
    graph.add_edge("agent", "review")
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=MemorySaver())


def main() -> None:
    graph = build()
    config: Any = {"configurable": {"thread_id": "desk-1"}}
    messages: list[AnyMessage] = [SystemMessage(SYSTEM)]
    answers = iter([{"approved": True}, {"confirmed": True}])
    for question in QUESTIONS:
        print(f"customer> {question}")
        result = graph.invoke({"messages": [*messages, HumanMessage(question)]}, config)
        while result.get("__interrupt__"):
            (paused,) = result["__interrupt__"]
            answer = next(answers)
            print(f"  [paused] {paused.value} -> {answer}")
            result = graph.invoke(Command(resume={paused.id: answer}), config)
        messages = result["messages"]
        for message in messages[-3:-1]:
            if message.type == "tool":
                print(f"  [tool] {message.name} -> {message.content}")
        print(f"agent> {messages[-1].content}")


if __name__ == "__main__":
    main()
