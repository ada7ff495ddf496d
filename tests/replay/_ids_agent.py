"""A small agent for forks whose live answers mint new tool-call ids: it asks where an order
is (or, with ``weather``, the weather in Paris), runs the tool the model calls against the
stand-in's tool backend and sends back its result. Its requests carry a ``seed``, so the
stand-in words its answers as it did when recorded: only the ids change.

As a program (``python -m tests.replay._ids_agent [misuse]``, ``STANDIN_URL`` set): the same
against the stand-in at that address; ``misuse`` appends ``x`` to the id it answers.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import httpx
import openai

KEY = "sk-test-not-a-secret"
QUESTION = "Where is my order A-1234?"
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city now.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
LOOKUP = {
    "name": "lookup_order",
    "description": "Look an order up by its id.",
    "parameters": {
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    },
}


def chat(base_url: str, tools_url: str, misuse: str = "", weather: bool = False) -> str:
    """Two model calls around one tool call (OpenAI Chat Completions at ``base_url``);
    ``misuse`` is appended to the tool message's ``tool_call_id`` (an id the model never
    named). ``weather``: ask for the weather in Paris, which the tool answers anew each time.
    The last answer's text."""
    with (
        openai.OpenAI(base_url=base_url, api_key=KEY) as client,
        httpx.Client(base_url=tools_url) as tools,
    ):
        question = "What is the weather in Paris?" if weather else QUESTION
        messages: list[Any] = [{"role": "user", "content": question}]
        offered: Any = [{"type": "function", "function": WEATHER if weather else LOOKUP}]
        first = client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, tools=offered, seed=1
        )
        message = first.choices[0].message
        (call,) = message.tool_calls or ()
        assert call.type == "function"
        arguments = json.loads(call.function.arguments)
        messages.append(message.model_dump(exclude_none=True))
        if weather:
            result = tools.get("/weather", params={"city": arguments["city"]}).text
        else:
            result = tools.get(f"/orders/{arguments['order_id']}").text
        messages.append({"role": "tool", "tool_call_id": call.id + misuse, "content": result})
        last = client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, tools=offered, seed=1
        )
        return last.choices[0].message.content or ""


if __name__ == "__main__":
    url = os.environ["STANDIN_URL"].rstrip("/")
    print(chat(f"{url}/v1", f"{url}/tools", misuse="x" if sys.argv[1:] == ["misuse"] else ""))
