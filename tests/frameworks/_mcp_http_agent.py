"""The order-desk agent of ``_mcp_agent.py`` with its MCP server reached over HTTP: streamable
HTTP (``streamable_http_client``) or SSE (``sse_client``), the server already running at URL.
The model (Chat Completions, the real openai SDK) is offered the server's tools, and each tool
call is ``ClientSession.call_tool``, with no otel-replay code.

    python _mcp_http_agent.py orders.sqlite URL streamable-http|sse

Environment: STANDIN_URL, the stand-in model provider; AGENT_SYSTEM, the system prompt.
The session's dispatcher logs at debug level to stderr, where it says what it drops (an answer
to a request it never sent).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from openai import AsyncOpenAI

from tests.frameworks._orders import QUESTIONS, SYSTEM


async def progress(done: float, total: float | None, message: str | None) -> None:
    print(f"  [progress] {done}/{total}: {message}")


@asynccontextmanager
async def connected(url: str, transport: str) -> AsyncIterator[ClientSession]:
    client = sse_client(url) if transport == "sse" else streamable_http_client(url)
    async with client as (read, write), ClientSession(read, write) as session:
        yield session


async def offered(session: ClientSession) -> list[Any]:
    """The server's tools as the model is offered them, listed again for each question (as
    the frameworks' MCP adapters do when they do not cache the listing)."""
    listed = await session.list_tools()
    return [
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
    dispatcher = logging.getLogger("mcp.shared.jsonrpc_dispatcher")
    dispatcher.setLevel(logging.DEBUG)
    dispatcher.addHandler(logging.StreamHandler())
    base = os.environ.get("STANDIN_URL", "http://127.0.0.1:8765").rstrip("/")
    client = AsyncOpenAI(base_url=f"{base}/v1", api_key="sk-standin-not-a-secret")
    system = os.environ.get("AGENT_SYSTEM", SYSTEM)
    async with connected(sys.argv[2], sys.argv[3]) as session:
        initialized = await session.initialize()
        print(f"server: {initialized.server_info.name}")
        messages: list[Any] = [{"role": "system", "content": system}]
        for question in (*QUESTIONS, "And what is the weather in Paris?"):
            tools = await offered(session)
            print(f"customer> {question}")
            messages.append({"role": "user", "content": question})
            print(f"agent> {await answer(client, session, tools, messages)}")


if __name__ == "__main__":
    asyncio.run(main())
