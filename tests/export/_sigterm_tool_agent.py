"""A smolagents agent's tools, the second one hung when SIGTERM comes (test_sigterm_tool)."""

from __future__ import annotations

import time

from smolagents import tool


@tool
def lookup_order(order_id: str) -> dict:  # type: ignore[type-arg]
    """Look an order up.

    Args:
        order_id: the order
    """
    return {"order_id": order_id, "status": "shipped"}


@tool
def refund_order(order_id: str, api_key: str) -> str:
    """Refund an order through the payment provider (which hangs).

    Args:
        order_id: the order
        api_key: the payment provider's key
    """
    print("refunding", flush=True)
    time.sleep(60)
    return "refunded"


print(lookup_order(order_id="A-1")["status"], flush=True)
print(refund_order(order_id="A-1", api_key="pk_live_0123456789abcdefXYZ"), flush=True)
