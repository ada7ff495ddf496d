"""An agent with one step of every kind, for the fork tests.

Steps as recorded: 0 ``uuid4`` (value), 1 model (asks for ``lookup_order``), 2
``lookup_order`` (read tool, SQLite), 3 model (answers), 4 ``GET /tools/weather`` (HTTP),
5 ``checkpoint("after_search")``, 6 model (asks for ``refund_order``), 7 ``refund_order``
(write tool: inserts a row), 8 model, streamed (answers).

    python -m tests.replay._fork_agent DB      # STANDIN_URL: the stand-in's base URL
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from typing import Any

import httpx
import openai

import otel_replay

MODEL = "gpt-4o-mini"


def _db(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, status TEXT);
        CREATE TABLE IF NOT EXISTS refunds (order_id TEXT, reason TEXT);
        INSERT OR IGNORE INTO orders VALUES ('A-1234', 'shipped');
        """
    )
    return db


def run_agent(db_path: str, base_url: str) -> list[str]:
    """Run the agent; the lines it says."""
    db = _db(db_path)

    @otel_replay.tool(effect="read")
    def lookup_order(order_id: str) -> dict[str, Any]:
        """Get an order's status."""
        row = db.execute("SELECT status FROM orders WHERE order_id = ?", (order_id,)).fetchone()
        return {"order_id": order_id, "status": row[0]}

    @otel_replay.tool(effect="write")
    def refund_order(order_id: str, reason: str) -> dict[str, Any]:
        """Refund an order."""
        db.execute("INSERT INTO refunds VALUES (?, ?)", (order_id, reason))
        db.commit()
        return {"order_id": order_id, "status": "refunded"}

    tools: dict[str, Any] = {"lookup_order": lookup_order, "refund_order": refund_order}
    definitions: Any = [
        {"type": "function", "function": fn.__otel_replay_contract__.definition()}
        for fn in tools.values()
    ]
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="sk-standin-not-a-secret")
    said = [f"ticket {otel_replay.uuid4()}"]
    messages: list[Any] = [{"role": "user", "content": "Where is my order A-1234?"}]

    def turn(stream: bool = False) -> str:
        """One model call, its tool calls run; the text it answered."""
        if stream:
            chunks = client.chat.completions.create(
                model=MODEL, messages=messages, tools=definitions, stream=True
            )
            return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        message = (
            client.chat.completions.create(model=MODEL, messages=messages, tools=definitions)
            .choices[0]
            .message
        )
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls or []:
            result = tools[call.function.name](**json.loads(call.function.arguments))
            content = json.dumps(result)
            said.append(f"{call.function.name} -> {content}")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        return message.content or ""

    turn()
    said.append(f"agent> {turn()}")
    weather = httpx.get(f"{base_url}/tools/weather", params={"city": "Paris"}).json()
    said.append(f"weather {weather['city']}")
    state = otel_replay.checkpoint("after_search", {"city": weather["city"]})
    messages.append(
        {"role": "user", "content": f"It broke in {state['city']}. Refund order A-1234."}
    )
    turn()
    said.append(f"agent> {turn(stream=True)}")
    return said


if __name__ == "__main__":
    base = os.environ.get("STANDIN_URL", "http://127.0.0.1:8765").rstrip("/")
    for line in run_agent(sys.argv[1], base):
        print(line)
