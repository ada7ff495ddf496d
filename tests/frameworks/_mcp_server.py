"""The order desk as an MCP server over stdio (``mcp``'s ``MCPServer``): ``lookup_order``
says it is read-only, ``refund_order`` that it is not, ``get_weather`` says nothing.
``refund_order`` reports its progress (``ctx.report_progress``) to a client that asks for it.

    python _mcp_server.py orders.sqlite
"""

from __future__ import annotations

import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

from tests.frameworks._orders import lookup, open_database, refund

DB = open_database(sys.argv[1])
server = MCPServer("orders")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup_order(order_id: str) -> dict[str, Any]:
    """Get an order's status, item and total."""
    return lookup(DB, order_id)


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
async def refund_order(order_id: str, reason: str, ctx: Context) -> dict[str, Any]:
    """Refund an order in full."""
    await ctx.report_progress(0, 2, f"checking order {order_id}")
    refunded = refund(DB, order_id, reason)
    await ctx.report_progress(1, 2, f"refund {refunded['refund_id']} issued")
    await ctx.report_progress(2, 2)
    return refunded


@server.tool()
def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city."""
    return {"city": city, "temperature_c": 21, "conditions": "sunny"}


if __name__ == "__main__":
    server.run()
