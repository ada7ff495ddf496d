"""An order-desk agent on smolagents: a ``ToolCallingAgent`` over Chat Completions whose tools
are plain ``@tool`` functions and a ``Tool`` subclass, with no otel-replay code in it.

    python _smolagents_agent.py orders.sqlite

Each question is one step of the agent (``max_steps=1``): the model's tool calls, then the
agent's final answer from a call without tools. The stand-in asks for ``lookup_order`` on a
question naming an order and for ``refund_order`` on one asking for a refund; an order that
does not exist makes the tool raise (smolagents tells the model the error). The last tool
call is one the agent's own code makes, by position, outside any agent.

Environment: STANDIN_URL, the stand-in model provider; AGENT_SYSTEM, a system prompt other
than the recorded one.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from smolagents import OpenAIServerModel, Tool, ToolCallingAgent, tool

from tests.frameworks._orders import QUESTIONS, SYSTEM, lookup, open_database, refund

DB = open_database(sys.argv[1])
BASE = os.environ.get("STANDIN_URL", "http://127.0.0.1:8765").rstrip("/")


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Get an order's status, item and total.

    Args:
        order_id: the order's id, such as A-1234
    """
    return lookup(DB, order_id)


class RefundOrder(Tool):
    name = "refund_order"
    description = "Refund an order in full."
    inputs = {  # noqa: RUF012 - smolagents reads the class attribute
        "order_id": {"type": "string", "description": "the order's id"},
        "reason": {"type": "string", "description": "why the customer wants the refund"},
    }
    output_type = "string"

    def forward(self, order_id: str, reason: str) -> str:
        return json.dumps(refund(DB, order_id, reason))


def agent() -> ToolCallingAgent:
    model = OpenAIServerModel(
        model_id="gpt-4o-mini", api_base=f"{BASE}/v1", api_key="sk-standin-not-a-secret"
    )
    return ToolCallingAgent(
        tools=[lookup_order, RefundOrder()],
        model=model,
        max_steps=1,
        instructions=os.environ.get("AGENT_SYSTEM", SYSTEM),
        verbosity_level=0,
    )


def main() -> None:
    for question in (*QUESTIONS, "Where is my order Z-9999?"):
        print(f"customer> {question}")
        desk = agent()
        answer = desk.run(question)
        for step in desk.memory.steps:
            for observed in (getattr(step, "observations", None) or "").splitlines():
                print(f"  [observed] {observed}")
            error = getattr(step, "error", None)
            if error is not None:
                print(f"  [error] {type(error).__name__}: {error}")
        print(f"agent> {answer}")
    again = lookup_order("A-1234")  # the agent's own call, outside any agent
    print(f"direct> {type(again).__name__} {json.dumps(again)}")


if __name__ == "__main__":
    main()
