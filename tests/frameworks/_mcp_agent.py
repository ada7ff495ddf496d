"""An order-desk agent whose tools live on an MCP server it starts over stdio: the model
(Chat Completions, the real openai SDK) is offered the server's tools, and each tool call is
``ClientSession.call_tool``, with no otel-replay code. Each call prints the progress the
server reports while it runs (its ``progress_callback``).

    python _mcp_agent.py orders.sqlite

Environment: STANDIN_URL, the stand-in model provider.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from openai import AsyncOpenAI

from tests.frameworks._orders import QUESTIONS, SYSTEM

ROOT = Path(__file__).resolve().parents[2]
SERVER = StdioServerParameters(
    command=sys.executable,
    args=[str(Path(__file__).with_name("_mcp_server.py")), sys.argv[1]],
    env={"PYTHONPATH": str(ROOT)},
)


async def progress(done: float, total: float | None, message: str | None) -> None:
    print(f"  [progress] {done}/{total}: {message}")


async def answer(
    client: AsyncOpenAI, session: ClientSession, tools: list[Any], messages: list[Any]
) -> str:
    for _ in range(6):
        completion = await client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, tools=tools
        )
        message = completion.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            result = await session.call_tool(
                call.function.name, json.loads(call.function.arguments), progress_callback=progress
            )
            text = "".join(part.text for part in result.content if part.type == "text")
            print(f"  [tool] {call.function.name} -> {text}")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
    raise RuntimeError("no answer after 6 model calls")


async def main() -> None:
    base = os.environ.get("STANDIN_URL", "http://127.0.0.1:8765").rstrip("/")
    client = AsyncOpenAI(base_url=f"{base}/v1", api_key="sk-standin-not-a-secret")
    async with stdio_client(SERVER) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        tools = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description or "",
                    "parameters": tool.input_schema,
                },
            }
            for tool in listed.tools
        ]
        messages: list[Any] = [{"role": "system", "content": SYSTEM}]
        for question in (*QUESTIONS, "And what is the weather in Paris?"):
            print(f"customer> {question}")
            messages.append({"role": "user", "content": question})
            print(f"agent> {await answer(client, session, tools, messages)}")


if __name__ == "__main__":
    asyncio.run(main())
