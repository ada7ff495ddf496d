"""An agent with a step of every kind and a step made inside a tool, for the report tests.

Steps as recorded: 0 ``uuid4`` (value), 1 model (asks for ``lookup_order``), 2
``lookup_order`` (read tool), 3 ``GET /tools/orders/A-1234`` (HTTP, made inside step 2), 4
model (answers with the order), 5 ``checkpoint("after_lookup")``, 6 model, streamed (the user
hands over a token, ``SECRET``, which ``OTEL_REPLAY_REDACT`` should remove, and some
``MARKUP`` the page must show as text).

    python -m tests.report._agent      # STANDIN_URL: the stand-in's base URL

``REPORT_AGENT_PROMPT`` replaces the system prompt (a replay with it diverges at step 1).
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx
import openai

import otel_replay

MODEL = "gpt-4o-mini"
SECRET = "tok_live_9f8e7d6c5b4a"
QUESTION = "Where is my order A-1234?"
PROMPT = "You are Ada, the support assistant of the shop."
MARKUP = '</script><img src="http://127.0.0.1:9/x.png">'
"""Markup in a message: shown as text, it neither closes the page's script nor loads."""


def main(base_url: str) -> None:
    tools_http = httpx.Client(base_url=f"{base_url}/tools")

    @otel_replay.tool(effect="read")
    def lookup_order(order_id: str) -> dict[str, Any]:
        """Get an order's status."""
        return dict(tools_http.get(f"/orders/{order_id}").json())

    definitions: Any = [
        {"type": "function", "function": lookup_order.__otel_replay_contract__.definition()}
    ]
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="sk-report-not-a-secret")
    print(f"ticket {otel_replay.uuid4()}")
    system = os.environ.get("REPORT_AGENT_PROMPT", PROMPT)
    messages: list[Any] = [
        {"role": "system", "content": system},
        {"role": "user", "content": QUESTION},
    ]
    for _ in range(2):
        message = (
            client.chat.completions.create(model=MODEL, messages=messages, tools=definitions)
            .choices[0]
            .message
        )
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls or []:
            result = lookup_order(**json.loads(call.function.arguments))
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
            )
    print(f"agent> {message.content}")
    otel_replay.checkpoint("after_lookup", {"turns": len(messages)})
    messages.append({"role": "user", "content": f"Thanks. My loyalty token is {SECRET}. {MARKUP}"})
    chunks = client.chat.completions.create(model=MODEL, messages=messages, stream=True)
    print("agent> " + "".join(c.choices[0].delta.content or "" for c in chunks if c.choices))


if __name__ == "__main__":
    main(os.environ.get("STANDIN_URL", "http://127.0.0.1:8765").rstrip("/"))
