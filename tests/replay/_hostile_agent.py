"""A small agent of each family of steps beyond HTTP, run in-process by
``test_recorded_values`` and as a program by its replays (``python _hostile_agent.py FAMILY``).

Each family prints one line of what it read, so a replay that got the recorded values prints
the same line.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

import otel_replay


class Order(BaseModel):
    id: str
    total: float


@otel_replay.tool
def lookup_order(order_id: str) -> Order:
    """An order as the shop's database holds it."""
    return Order(id=order_id, total=12.5)


def values() -> str:
    """The clock, an id, a big number and rows, as values."""
    started = otel_replay.now()
    ticket = otel_replay.uuid4()
    big = otel_replay.side_effect("big", lambda: 2**70 + 1)
    rows = otel_replay.side_effect("rows", lambda: [{"sku": "KB-101"}])
    return f"{started.isoformat()} {ticket} {big!r} {rows!r}"


def tools() -> str:
    """A typed tool result."""
    order = lookup_order("A-1")
    return f"{order.id} {order.total:.2f}"


def checkpoints() -> str:
    """A graph on a checkpointer, invoked twice on one thread, then its history listed."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class Count(TypedDict):
        n: int

    def bump(state: Count) -> dict[str, Any]:
        return {"n": state["n"] + 1}

    graph = StateGraph(Count)
    graph.add_node("bump", bump)
    graph.add_edge(START, "bump")
    app = graph.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "count-1"}}
    first = app.invoke({"n": 1}, config)
    second = app.invoke({"n": 5}, config)
    history = list(app.get_state_history(config))
    return f"{first['n']} {second['n']} {len(history)}"


def memories() -> str:
    """A long-term memory written, then searched, read and listed."""
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore()
    store.put(("user-7",), "tea", {"text": "likes green tea"})
    found = store.search(("user-7",))
    item = store.get(("user-7",), "tea")
    spaces = store.list_namespaces()
    return f"{[f.key for f in found]} {item.value['text'] if item else None} {spaces}"


def sessions() -> str:
    """An Agents SDK session's items, read, then the last one popped."""
    from agents import SQLiteSession

    async def read() -> str:
        session = SQLiteSession("desk-7")
        try:
            await session.add_items(
                [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
            )
            items = await session.get_items()
            popped = await session.pop_item()
        finally:
            session.close()  # its in-memory database's connections
        return f"{[item['role'] for item in items]} {popped}"

    return asyncio.run(read())


FAMILIES: dict[str, Callable[[], str]] = {
    "value": values,
    "tool": tools,
    "checkpoint": checkpoints,
    "store": memories,
    "session": sessions,
}


if __name__ == "__main__":
    print(FAMILIES[sys.argv[1]]())
