"""An order-desk agent in LangGraph whose tools ask a human through ``interrupt()`` with a
typed value: ``lookup_order`` with a dataclass (``Verify``: is the caller the customer?),
``refund_order`` with a pydantic model (``RefundAsk``: the amount to confirm). The caller reads
the pause's attributes to answer it (``ask.amount``), as code written against those types
does, and resumes with ``Command(resume=...)``; an ``InMemorySaver`` keeps the state.
``lookup_order`` returns a pydantic ``Order`` and says so nowhere (no return annotation):
``ToolNode`` sends the model its text.

    python _langgraph_typed_interrupt_agent.py orders.sqlite

Environment: STANDIN_URL, the stand-in model provider; AGENT_SYSTEM, the system prompt.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt
from pydantic import BaseModel

from tests.frameworks._langgraph_graph import tool_loop
from tests.frameworks._orders import QUESTIONS, SYSTEM, lookup, open_database, refund

DB = open_database(sys.argv[1])


@dataclass
class Verify:
    order_id: str
    question: str


class RefundAsk(BaseModel):
    order_id: str
    amount: float
    currency: str


class Order(BaseModel):
    order_id: str
    status: str
    total: float


@tool
def lookup_order(order_id: str):  # an Order (or a dict), not annotated
    """Get an order's status and total, once the caller is verified."""
    if not interrupt(Verify(order_id, "Is the caller the customer?")):
        return {"order_id": order_id, "error": "caller not verified"}
    found = lookup(DB, order_id)
    return Order(order_id=order_id, status=found["status"], total=found["total"])


@tool
def refund_order(order_id: str, reason: str) -> dict[str, Any]:
    """Refund an order in full, once a human confirmed the amount."""
    order = lookup(DB, order_id)
    ask = RefundAsk(order_id=order_id, amount=order["total"], currency=order["currency"])
    if not interrupt(ask).get("confirmed"):
        return {"order_id": order_id, "status": "not refunded"}
    return refund(DB, order_id, reason)


TOOLS = [lookup_order, refund_order]


def answer(ask: Verify | RefundAsk) -> Any:
    """What the human says, read from the typed question."""
    if isinstance(ask, Verify):
        return ask.order_id.startswith("A-")
    return {"confirmed": ask.amount < 500, "note": f"{ask.amount} {ask.currency} approved"}


def main() -> None:
    graph = tool_loop(TOOLS, InMemorySaver())
    config: Any = {"configurable": {"thread_id": "desk-3"}}
    messages: list[AnyMessage] = [SystemMessage(os.environ.get("AGENT_SYSTEM", SYSTEM))]
    for question in QUESTIONS:
        print(f"customer> {question}")
        result = graph.invoke({"messages": [*messages, HumanMessage(question)]}, config)
        while result.get("__interrupt__"):
            (paused,) = result["__interrupt__"]
            said = answer(paused.value)
            print(f"  [paused] {paused.value!r} -> {said}")
            result = graph.invoke(Command(resume={paused.id: said}), config)
        messages = result["messages"]
        for message in messages[-3:-1]:
            if message.type == "tool":
                print(f"  [tool] {message.name} -> {message.content}")
        print(f"agent> {messages[-1].content}")


if __name__ == "__main__":
    main()
