"""An order-desk agent in LangGraph that keeps its conversation in a checkpointer: compiled
with one, and asked twice on the same ``thread_id``, the second ``invoke`` given only the new
question (the first turn's messages come from the checkpoint). Its tools are plain LangChain
``@tool`` functions with no otel-replay code.

    python _langgraph_thread_agent.py orders.sqlite memory|sqlite|aiosqlite

``memory`` keeps the checkpoints in an ``InMemorySaver``; ``sqlite`` in a ``SqliteSaver``
(langgraph-checkpoint-sqlite) on a file beside the database that outlives the program, as a
deployed agent's does: a run on a thread the file already holds starts where the last one
ended; ``aiosqlite`` the same through ``ainvoke`` and an ``AsyncSqliteSaver``.

Environment: STANDIN_URL, the stand-in model provider; AGENT_SYSTEM, the system prompt.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from tests.frameworks._langgraph_graph import tool_loop
from tests.frameworks._orders import QUESTIONS, SYSTEM, lookup, open_database, refund

DB = open_database(sys.argv[1])
CHECKPOINTS = Path(sys.argv[1]).with_suffix(".checkpoints.sqlite")


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Get an order's status, item and total."""
    return lookup(DB, order_id)


@tool
def refund_order(order_id: str, reason: str) -> dict[str, Any]:
    """Refund an order in full."""
    return refund(DB, order_id, reason)


TOOLS = [lookup_order, refund_order]


@contextlib.contextmanager
def checkpointer(kind: str) -> Iterator[BaseCheckpointSaver[Any]]:
    if kind == "memory":
        yield InMemorySaver()
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(str(CHECKPOINTS)) as saver:
        yield saver


CONFIG: Any = {"configurable": {"thread_id": "desk-7"}}


def asked(question: str, first: bool) -> dict[str, Any]:
    print(f"customer> {question}")
    system = [SystemMessage(os.environ.get("AGENT_SYSTEM", SYSTEM))] if first else []
    return {"messages": [*system, HumanMessage(question)]}  # the thread holds the rest


def answered(result: dict[str, Any]) -> None:
    for message in result["messages"][-3:-1]:
        if message.type == "tool":
            print(f"  [tool] {message.name} -> {message.content}")
    print(f"agent> {result['messages'][-1].content}")


def main() -> None:
    with checkpointer(sys.argv[2]) as saver:
        graph = tool_loop(TOOLS, saver)
        for n, question in enumerate(QUESTIONS):
            result = graph.invoke(asked(question, n == 0), CONFIG)
            answered(result)
        history = list(graph.get_state_history(CONFIG))
        print(f"[thread] {len(result['messages'])} messages, {len(history)} checkpoints")


async def amain() -> None:
    """The same conversation through ``ainvoke`` and an ``AsyncSqliteSaver``."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(str(CHECKPOINTS)) as saver:
        graph = tool_loop(TOOLS, saver)
        for n, question in enumerate(QUESTIONS):
            result = await graph.ainvoke(asked(question, n == 0), CONFIG)
            answered(result)
        history = [state async for state in graph.aget_state_history(CONFIG)]
        print(f"[thread] {len(result['messages'])} messages, {len(history)} checkpoints")


if __name__ == "__main__":
    if sys.argv[2] == "aiosqlite":
        asyncio.run(amain())
    else:
        main()
