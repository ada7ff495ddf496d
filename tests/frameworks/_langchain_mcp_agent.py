"""An order-desk agent in LangGraph whose tools are an MCP server's, loaded as LangChain
tools by ``langchain-mcp-adapters`` (``load_mcp_tools``), with no otel-replay code. Each tool
call is LangChain's tool call whose body is the MCP session's ``call_tool``.

    python _langchain_mcp_agent.py orders.sqlite

It runs on mcp 1.x (``langchain-mcp-adapters`` requires it): ``.venv/mcp1`` first on
``PYTHONPATH``. Environment: STANDIN_URL, the stand-in model provider.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import mcp
from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.frameworks._langgraph_graph import tool_loop
from tests.frameworks._orders import QUESTIONS, SYSTEM

ROOT = Path(__file__).resolve().parents[2]
MCP1 = Path(mcp.__file__).resolve().parents[1]  # the server runs on the same mcp 1.x
SERVER = StdioServerParameters(
    command=sys.executable,
    args=[str(Path(__file__).with_name("_mcp1_server.py")), sys.argv[1]],
    env={"PYTHONPATH": f"{MCP1}{os.pathsep}{ROOT}"},
)


async def main() -> None:
    async with stdio_client(SERVER) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        graph = tool_loop(await load_mcp_tools(session))
        messages: list[AnyMessage] = [SystemMessage(SYSTEM)]
        for question in QUESTIONS:
            print(f"customer> {question}")
            result = await graph.ainvoke({"messages": [*messages, HumanMessage(question)]})
            messages = result["messages"]
            for message in messages[-3:-1]:
                if message.type == "tool":
                    print(f"  [tool] {message.name} -> {message.content}")
            print(f"agent> {messages[-1].content}")


if __name__ == "__main__":
    asyncio.run(main())
