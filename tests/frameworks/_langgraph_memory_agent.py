"""An order-desk agent in LangGraph with a long-term memory: a ``SqliteStore``
(langgraph-checkpoint-sqlite) on a file kept from run to run, as a deployed agent's is. It
recalls what earlier runs noted about the customer (``store.search``) into its system prompt,
serves the conversation, then notes it (``store.put``). Its tools are those of the thread
agent: plain LangChain ``@tool`` functions with no otel-replay code.

    python _langgraph_memory_agent.py orders.sqlite

Environment: STANDIN_URL, the stand-in model provider; AGENT_SYSTEM, the system prompt.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.store.sqlite import SqliteStore

from tests.frameworks._langgraph_graph import tool_loop
from tests.frameworks._langgraph_thread_agent import TOOLS, answered
from tests.frameworks._orders import QUESTIONS, SYSTEM

MEMORIES = Path(sys.argv[1]).with_suffix(".memories.sqlite")
CUSTOMER = ("customers", "A-1234")


def main() -> None:
    with SqliteStore.from_conn_string(str(MEMORIES)) as store:
        store.setup()
        recalled = store.search(CUSTOMER)
        notes = "".join(f" Noted earlier: {item.value['text']}" for item in recalled)
        messages: list[Any] = [SystemMessage(os.environ.get("AGENT_SYSTEM", SYSTEM) + notes)]
        graph = tool_loop(TOOLS)
        for question in QUESTIONS:
            print(f"customer> {question}")
            result = graph.invoke({"messages": [*messages, HumanMessage(question)]})
            answered(result)
            messages = result["messages"]
        store.put(CUSTOMER, f"note-{len(recalled)}", {"text": "asked for a refund of A-1234."})
        print(f"[memory] {len(recalled)} recalled, {len(store.search(CUSTOMER))} kept")


if __name__ == "__main__":
    main()
