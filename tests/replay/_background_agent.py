"""An agent whose SDKs upload their own telemetry beside its model calls, with no otel-replay
code.

    python _background_agent.py agents|langsmith|requests

* ``agents``: an OpenAI Agents SDK agent (Chat Completions, one function tool) with the SDK's
  own tracing on: its default exporter uploads traces to ``/v1/traces/ingest``, on the stand-in
  here as it would on OpenAI's API, from a background thread.
* ``langsmith``: a ``@traceable`` function calling the model through the openai SDK; the real
  LangSmith client posts its runs to ``LANGSMITH_ENDPOINT`` through ``requests``.
* ``requests``: a model call through ``requests`` alone (the OTLP exporter tests).

Prints the answers, then a JSON line of what the SDK's uploads met (``uploads``).
Environment: STANDIN_URL, the stand-in model provider.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

BASE = os.environ.get("STANDIN_URL", "http://127.0.0.1:8765").rstrip("/")
QUESTION = "Where is order A-1234?"
KEY = "sk-standin-not-a-secret"


def agents() -> list[Any]:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
    from agents.tracing import processors
    from openai import AsyncOpenAI

    exporter = processors.default_exporter()
    exporter.endpoint = f"{BASE}/v1/traces/ingest"
    met: list[Any] = []
    post = exporter._client.post

    def watched(*args: Any, **kwargs: Any) -> Any:
        response = post(*args, **kwargs)
        met.append(response.status_code)
        return response

    exporter._client.post = watched  # type: ignore[method-assign]

    @function_tool
    def lookup_order(order_id: str) -> dict[str, Any]:
        """Get an order's status."""
        return {"order_id": order_id, "status": "shipped", "carrier": "UPS"}

    client = AsyncOpenAI(base_url=f"{BASE}/v1", api_key=KEY)
    model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
    agent = Agent(name="desk", instructions="You are terse.", tools=[lookup_order], model=model)
    result = asyncio.run(Runner.run(agent, QUESTION))
    print(f"agent> {result.final_output}")
    processors.default_processor().force_flush()  # the uploads happen before we report
    return met


def langsmith() -> list[Any]:
    from langsmith import traceable
    from langsmith.run_trees import get_cached_client
    from openai import OpenAI

    client = OpenAI(base_url=f"{BASE}/v1", api_key=KEY)

    @traceable(name="support")
    def answer(question: str) -> str:
        reply = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": question}], seed=7
        )
        return reply.choices[0].message.content or ""

    print(f"agent> {answer(QUESTION)}")
    get_cached_client().flush()  # the uploads happen before we report
    return []


def plain_requests() -> list[Any]:
    import requests

    reply = requests.post(
        f"{BASE}/v1/chat/completions",
        json={
            "model": "gpt-4o-mini",
            "seed": 7,
            "messages": [{"role": "user", "content": QUESTION}],
        },
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=30,
    )
    print(f"agent> {reply.json()['choices'][0]['message']['content']}")
    return []


if __name__ == "__main__":
    mode = sys.argv[1]
    uploads = {"agents": agents, "langsmith": langsmith, "requests": plain_requests}[mode]()
    print(json.dumps({"uploads": uploads}))
