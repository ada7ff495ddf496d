"""An OpenAI Agents SDK agent whose tools are those of an MCP server it starts over stdio
(the SDK's ``MCPServerStdio``): each tool call is an SDK function tool that calls the MCP
server's tool, with no otel-replay code.

    python _agents_mcp_agent.py orders.sqlite

Environment: STANDIN_URL, the stand-in model provider.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStdio
from openai import AsyncOpenAI

from tests.frameworks._orders import QUESTIONS, SYSTEM

ROOT = Path(__file__).resolve().parents[2]


async def main() -> None:
    set_tracing_disabled(True)
    base = os.environ.get("STANDIN_URL", "http://127.0.0.1:8765").rstrip("/")
    client = AsyncOpenAI(base_url=f"{base}/v1", api_key="sk-standin-not-a-secret")
    server = MCPServerStdio(
        {
            "command": sys.executable,
            "args": [str(Path(__file__).with_name("_mcp_server.py")), sys.argv[1]],
            "env": {"PYTHONPATH": str(ROOT)},
        },
        cache_tools_list=True,
    )
    async with server:
        agent = Agent(
            name="desk",
            instructions=SYSTEM,
            mcp_servers=[server],
            model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
        )
        history: list[Any] = []
        for question in QUESTIONS:
            print(f"customer> {question}")
            result = await Runner.run(agent, [*history, {"role": "user", "content": question}])
            for item in result.new_items:
                if item.type == "tool_call_output_item":
                    print(f"  [tool] -> {item.output}")
            print(f"agent> {result.final_output}")
            history = result.to_input_list()


if __name__ == "__main__":
    asyncio.run(main())
