"""An order-desk agent on Haystack: an ``Agent`` over ``OpenAIChatGenerator`` whose tools are
plain ``@tool`` functions, one sync, one async, with no otel-replay code in it.

    python _haystack_agent.py orders.sqlite

``Agent.run`` streams the first question (the tool call and the answer come as chunks) and
asks about an order that does not exist (the tool raises; Haystack tells the model the
error); ``Agent.run_async`` handles the refund, its sync lookup run in a worker thread and its
async refund awaited, then the first question again.

Environment: STANDIN_URL, the stand-in model provider; AGENT_SYSTEM, a system prompt other
than the recorded one.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from haystack.components.agents import Agent
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.dataclasses import ChatMessage, StreamingChunk
from haystack.tools import tool
from haystack.utils import Secret

from tests.frameworks._orders import QUESTIONS, SYSTEM, lookup, open_database, refund

DB = open_database(sys.argv[1])
BASE = os.environ.get("STANDIN_URL", "http://127.0.0.1:8765").rstrip("/")


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Get an order's status, item and total."""
    return lookup(DB, order_id)


@tool
async def refund_order(order_id: str, reason: str) -> dict[str, Any]:
    """Refund an order in full."""
    return refund(DB, order_id, reason)


def agent(*tools: Any) -> Agent:
    generator = OpenAIChatGenerator(
        model="gpt-4o-mini",
        api_base_url=f"{BASE}/v1",
        api_key=Secret.from_token("sk-standin-not-a-secret"),
    )
    return Agent(
        chat_generator=generator,
        tools=list(tools),
        system_prompt=os.environ.get("AGENT_SYSTEM", SYSTEM),
    )


def show(result: dict[str, Any]) -> None:
    for message in result["messages"]:
        for outcome in message.tool_call_results:
            flag = " (error)" if outcome.error else ""
            print(f"  [tool] {outcome.origin.tool_name}{flag} -> {outcome.result}")
    print(f"agent> {result['messages'][-1].text}")


def main() -> None:
    chunks: list[StreamingChunk] = []
    desk = agent(lookup_order)
    print(f"customer> {QUESTIONS[0]}")
    show(desk.run([ChatMessage.from_user(QUESTIONS[0])], streaming_callback=chunks.append))
    print(f"  (streamed in {len([c for c in chunks if c.content])} text chunks)")
    print("customer> Where is my order Z-9999?")
    show(desk.run([ChatMessage.from_user("Where is my order Z-9999?")]))
    asyncio.run(later())


async def later() -> None:
    both = agent(lookup_order, refund_order)
    for question in (QUESTIONS[1], QUESTIONS[0]):
        print(f"customer> {question}")
        show(await both.run_async([ChatMessage.from_user(question)]))


if __name__ == "__main__":
    main()
