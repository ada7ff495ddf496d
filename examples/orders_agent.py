"""An order-desk agent whose tools read and write a local SQLite database.

The world beyond HTTP, as real agents have it: ``lookup_order`` reads the database,
``refund_order`` writes it, each ticket gets an id from ``otel_replay.uuid4()`` and a time from
``otel_replay.now()``. Recorded, then replayed after the database changed (the order was
delivered in the meantime), the agent prints exactly what it printed when it was recorded and
the refund is not written twice: the tools are steps, served from the recording.

    python examples/orders_agent.py orders.sqlite      # creates the database when missing

Environment: STANDIN_URL (default http://127.0.0.1:8765), the stand-in model provider.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import uuid
from typing import Any

import openai
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageParam

import otel_replay

QUESTIONS = ("Where is my order A-1234?", "It arrived broken, please refund order A-1234.")


def open_database(path: str) -> sqlite3.Connection:
    """The order database, created with one shipped order when missing."""
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS orders (
            order_id TEXT PRIMARY KEY, status TEXT, total REAL, currency TEXT, item TEXT);
        CREATE TABLE IF NOT EXISTS refunds (
            refund_id TEXT PRIMARY KEY, order_id TEXT, amount REAL, reason TEXT, key TEXT);
        INSERT OR IGNORE INTO orders VALUES ('A-1234', 'shipped', 129.0, 'EUR', 'headphones');
        """
    )
    db.commit()
    return db


DB = open_database(sys.argv[1] if len(sys.argv) > 1 else "orders.sqlite")


@otel_replay.tool(effect="read")  # only reads: replay --live-tools read may run it live
def lookup_order(order_id: str) -> dict[str, Any]:
    """Get an order's status, item and total."""
    row = DB.execute(
        "SELECT order_id, status, total, currency, item FROM orders WHERE order_id = ?",
        (order_id,),
    ).fetchone()
    if row is None:
        raise LookupError(f"no order {order_id}")
    order_id, status, total, currency, item = row
    return {
        "order_id": order_id,
        "status": status,
        "total": total,
        "currency": currency,
        "items": [{"name": item, "quantity": 1}],
    }


@otel_replay.tool(effect="write")
def refund_order(order_id: str, reason: str) -> dict[str, Any]:
    """Refund an order in full."""
    # The body runs only when recording: what it does inside is frozen with its result.
    total, currency = DB.execute(
        "SELECT total, currency FROM orders WHERE order_id = ?", (order_id,)
    ).fetchone()
    refund_id = f"R-{uuid.uuid4().hex[:8]}"
    key = otel_replay.idempotency_key()
    DB.execute(
        "INSERT INTO refunds VALUES (?, ?, ?, ?, ?)", (refund_id, order_id, total, reason, key)
    )
    DB.execute("UPDATE orders SET status = 'refunded' WHERE order_id = ?", (order_id,))
    DB.commit()
    return {
        "refund_id": refund_id,
        "order_id": order_id,
        "amount": total,
        "currency": currency,
        "status": "issued",
    }


TOOLS: list[ChatCompletionFunctionToolParam] = [
    {"type": "function", "function": fn.__otel_replay_contract__.definition()}  # type: ignore[attr-defined,typeddict-item]
    for fn in (lookup_order, refund_order)
]
IMPLEMENTATIONS = {"lookup_order": lookup_order, "refund_order": refund_order}


def answer(client: openai.OpenAI, messages: list[ChatCompletionMessageParam]) -> str:
    """Run the model/tool loop until the model answers in text."""
    for _ in range(6):
        completion = client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, tools=TOOLS
        )
        message = completion.choices[0].message
        calls = [c for c in message.tool_calls or [] if c.type == "function"]
        messages.append(message.model_dump(exclude_none=True))  # type: ignore[arg-type]
        if not calls:
            return message.content or ""
        for call in calls:
            try:
                result: Any = IMPLEMENTATIONS[call.function.name](
                    **json.loads(call.function.arguments)
                )
            except LookupError as exc:
                result = {"error": str(exc)}
            content = json.dumps(result)
            print(f"  [tool] {call.function.name} -> {content}")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
    raise RuntimeError("no answer after 6 model calls")


def main() -> None:
    base = os.environ.get("STANDIN_URL", "http://127.0.0.1:8765").rstrip("/")
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-standin-not-a-secret")
    ticket = otel_replay.uuid4()
    opened = otel_replay.now()
    print(f"ticket {ticket} opened {opened.isoformat()}")
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "You are the order desk of Northwind. Use the tools."}
    ]
    for question in QUESTIONS:
        print(f"customer> {question}")
        messages.append({"role": "user", "content": question})
        print(f"agent> {answer(client, messages)}")
    otel_replay.checkpoint("closed", {"ticket": str(ticket), "turns": len(messages)})


if __name__ == "__main__":
    main()
