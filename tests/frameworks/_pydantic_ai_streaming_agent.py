"""An order-desk agent in Pydantic AI run the ways its users reach for past a text
``run_sync``: structured output (``output_type``) and streaming. Its tools take the run
context (``RunContext`` with ``deps``); no otel-replay code.

    python _pydantic_ai_streaming_agent.py orders.sqlite

- ``run_sync`` with ``output_type=OrderStatus`` (a lookup, then the model's output tool);
- ``run_stream`` with the same ``output_type`` (the refund: the write), its partial outputs
  streamed with ``stream_output()``;
- ``run_stream`` of text, ``stream_text()`` (whole text so far) with the lookup;
- ``run_stream_events()``: every event of a run with the lookup, printed by kind;
- ``run_sync`` whose ``output_type`` is an output function, ``file_ticket`` (a write: a row
  in ``tickets``), called with the model's arguments for the final output.

The model is ``standin-structured``, which answers through the output tool when one is offered.

Environment: STANDIN_URL, the stand-in model provider; AGENT_SYSTEM, a system prompt other
than the recorded one.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import uuid
from dataclasses import dataclass
from typing import Any

import pydantic
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ToolReturnPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tests.frameworks._orders import QUESTIONS, SYSTEM, lookup, open_database, refund


@dataclass
class Desk:
    """The run's dependencies, reached by the tools through ``ctx.deps``."""

    db: sqlite3.Connection
    clerk: str


class OrderStatus(pydantic.BaseModel):
    order_id: str
    status: str
    total: float
    summary: str


class Ticket(pydantic.BaseModel):
    ticket_id: str
    order_id: str
    summary: str


class Refund(pydantic.BaseModel):
    refund_id: str
    order_id: str
    amount: float
    currency: str
    status: str


DESK = Desk(open_database(sys.argv[1]), "ada")
DESK.db.execute("CREATE TABLE IF NOT EXISTS tickets (ticket_id TEXT PRIMARY KEY, order_id TEXT)")
base = os.environ.get("STANDIN_URL", "http://127.0.0.1:8765").rstrip("/")
model = OpenAIChatModel(
    "standin-structured",
    provider=OpenAIProvider(base_url=f"{base}/v1", api_key="sk-standin-not-a-secret"),
)
agent = Agent(model, deps_type=Desk, system_prompt=os.environ.get("AGENT_SYSTEM", SYSTEM))


@agent.tool
def lookup_order(ctx: RunContext[Desk], order_id: str) -> dict[str, Any]:
    """Get an order's status, item and total."""
    return lookup(ctx.deps.db, order_id) | {"clerk": ctx.deps.clerk}


@agent.tool
async def refund_order(ctx: RunContext[Desk], order_id: str, reason: str) -> Refund:
    """Refund an order in full."""
    return Refund(**refund(ctx.deps.db, order_id, f"{reason} (by {ctx.deps.clerk})"))


def file_ticket(ctx: RunContext[Desk], order_id: str, status: str, summary: str) -> Ticket:
    """File a support ticket about an order (the run's output)."""
    ticket_id = f"T-{uuid.uuid4().hex[:8]}"
    ctx.deps.db.execute("INSERT INTO tickets VALUES (?, ?)", (ticket_id, order_id))
    ctx.deps.db.commit()
    return Ticket(ticket_id=ticket_id, order_id=order_id, summary=f"{status}: {summary}")


def show(messages: list[Any]) -> None:
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                kind = type(part.content).__name__
                print(f"  [tool] {part.tool_name} -> {kind} {part.model_response_str()}")


async def streamed_output(question: str) -> None:
    async with agent.run_stream(question, deps=DESK, output_type=OrderStatus) as stream:
        partial = [output async for output in stream.stream_output(debounce_by=None)]
        final = await stream.get_output()
        show(stream.new_messages())
    print(f"  [partial outputs] {len(partial) > 0} last={partial[-1]!r}")
    print(f"agent (streamed {type(final).__name__})> {final!r}")


async def streamed_text(question: str) -> None:
    async with agent.run_stream(question, deps=DESK, output_type=str) as stream:
        texts = [text async for text in stream.stream_text(debounce_by=None)]
        show(stream.new_messages())
    print(f"agent (streamed text)> {texts[-1]}")


async def events(question: str) -> None:
    kinds: list[str] = []
    async with agent.run_stream_events(question, deps=DESK, output_type=str) as stream:
        async for event in stream:
            kind = getattr(event, "event_kind", type(event).__name__)
            if not kinds or kinds[-1] != kind:
                kinds.append(kind)
            if kind == "function_tool_result":
                part = event.part
                print(f"  [event tool] {part.tool_name} -> {part.model_response_str()}")
            if kind == "agent_run_result":
                print(f"agent (events)> {event.result.output}")
    print(f"  [event kinds] {' '.join(kinds)}")


def main() -> None:
    print(f"customer> {QUESTIONS[0]}")
    first = agent.run_sync(QUESTIONS[0], deps=DESK, output_type=OrderStatus)
    show(first.new_messages())
    print(f"agent ({type(first.output).__name__})> {first.output!r}")
    print(f"customer> {QUESTIONS[1]}")
    asyncio.run(streamed_output(QUESTIONS[1]))
    print(f"customer> {QUESTIONS[0]}")
    asyncio.run(streamed_text(QUESTIONS[0]))
    print(f"customer> {QUESTIONS[0]}")
    asyncio.run(events(QUESTIONS[0]))
    print(f"customer> {QUESTIONS[0]}")
    ticket = agent.run_sync(QUESTIONS[0], deps=DESK, output_type=file_ticket)
    print(f"agent ({type(ticket.output).__name__})> {ticket.output!r}")


if __name__ == "__main__":
    main()
