"""The order desk as an MCP server over stdio for mcp 1.x (``FastMCP``), the line
``langchain-mcp-adapters`` runs on: ``lookup_order`` says it is read-only, ``refund_order``
that it is not.

    python _mcp1_server.py orders.sqlite
"""

from __future__ import annotations

import sys
from typing import Any

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

from tests.frameworks._orders import lookup, open_database, refund

DB = open_database(sys.argv[1])
server = FastMCP("orders")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def lookup_order(order_id: str) -> dict[str, Any]:
    """Get an order's status, item and total."""
    return lookup(DB, order_id)


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
def refund_order(order_id: str, reason: str) -> dict[str, Any]:
    """Refund an order in full."""
    return refund(DB, order_id, reason)


if __name__ == "__main__":
    server.run()
