"""A toy HTTP tool backend for the example agent, served under `/tools/`.

- `GET /tools/orders/{order_id}` -> the order (status, items, total, ...). Ids of the form
  `A-1234` (one letter A-W, a dash, 4-6 digits) exist and are deterministic per id; any other
  id (for example `Z-9999`) is a 404 `{"error": {...}}`.
- `GET /tools/weather?city=Paris` -> current weather, different on every call like a live API.
- `POST /tools/refunds` with JSON `{"order_id": ..., "reason": ...}` -> 201 refund confirmation
  with a random id; 404 for unknown orders, 400 for a malformed body.
- `failed(status)`: the error the server answers a refused tool call with
  (`x-standin-fail-first`, `x-standin-fail-status`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import re
from typing import Any
from urllib.parse import parse_qs, unquote

from ._wire import JsonReply, hex_id, json_reply, new_id

_KNOWN_ORDER = re.compile(r"^[A-W]-\d{4,6}$")
_STATUSES = ("processing", "shipped", "in transit", "out for delivery", "delivered")
_CATALOG = (
    ("KB-101", "mechanical keyboard", 89.00),
    ("MS-220", "wireless mouse", 29.50),
    ("HD-310", "noise-cancelling headphones", 149.00),
    ("CB-015", "USB-C cable", 9.99),
    ("MN-270", "27-inch monitor", 229.00),
    ("LS-050", "laptop stand", 39.90),
)
_CONDITIONS = ("sunny", "partly cloudy", "overcast", "light rain", "showers", "windy", "foggy")
_BASE_DATE = dt.date(2025, 6, 2)
_live = random.SystemRandom()


def handle(method: str, path: str, query: str, body: bytes) -> JsonReply:
    """Answer one request whose path starts with `/tools/`."""
    route = path.removeprefix("/tools").rstrip("/")
    if method == "GET" and route.startswith("/orders/"):
        return _order_reply(unquote(route.removeprefix("/orders/")))
    if method == "GET" and route == "/weather":
        city = (parse_qs(query).get("city") or [""])[0].strip()
        if not city:
            return _error(400, "missing query parameter 'city'")
        return json_reply(200, _weather(city))
    if method == "POST" and route == "/refunds":
        return _refund(body)
    return _error(404, f"no tool at {method} {path}")


def order(order_id: str) -> dict[str, Any] | None:
    """The order the backend serves for `order_id`, or None when it does not exist."""
    if not _KNOWN_ORDER.match(order_id):
        return None
    rng = random.Random(hashlib.sha256(order_id.encode()).digest())
    lines = [(sku, name, rng.randint(1, 2), price) for sku, name, price in rng.sample(_CATALOG, 2)]
    lines = lines[: rng.randint(1, 2)]
    return {
        "order_id": order_id,
        "status": rng.choice(_STATUSES),
        "items": [
            {"sku": sku, "name": name, "quantity": quantity, "unit_price": price}
            for sku, name, quantity, price in lines
        ],
        "total": round(sum(quantity * price for _, _, quantity, price in lines), 2),
        "currency": "USD",
        "carrier": rng.choice(("UPS", "DHL", "FedEx")),
        "tracking_number": "1Z" + "".join(rng.choice("0123456789ABCDEF") for _ in range(14)),
        "estimated_delivery": str(_BASE_DATE + dt.timedelta(days=rng.randint(1, 9))),
    }


def _order_reply(order_id: str) -> JsonReply:
    found = order(order_id)
    if found is None:
        return _error(404, f"order {order_id} not found")
    return json_reply(200, found)


def _weather(city: str) -> dict[str, Any]:
    return {
        "city": city,
        "temperature_c": round(_live.uniform(-5, 32), 1),
        "conditions": _live.choice(_CONDITIONS),
        "humidity": _live.randint(25, 95),
        "wind_kph": round(_live.uniform(0, 45), 1),
        "observed_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


def _refund(body: bytes) -> JsonReply:
    try:
        request = json.loads(body or b"null")
    except ValueError:
        return _error(400, "body must be JSON")
    if not isinstance(request, dict) or not isinstance(request.get("order_id"), str):
        return _error(400, "body must be a JSON object with a string 'order_id'")
    found = order(request["order_id"])
    if found is None:
        return _error(404, f"order {request['order_id']} not found")
    refund = {
        "refund_id": new_id("rf_", 16),
        "order_id": found["order_id"],
        "amount": found["total"],
        "currency": found["currency"],
        "reason": str(request.get("reason") or "customer request"),
        "status": "approved",
    }
    return json_reply(201, refund, headers=(("x-request-id", hex_id("", 16)),))


def failed(status: int) -> JsonReply:
    """A tool call refused with ``status`` (a 5xx: the backend is down)."""
    message = "service unavailable" if status >= 500 else "too many requests"
    return _error(status, message)


def _error(status: int, message: str) -> JsonReply:
    return json_reply(status, {"error": {"status": status, "message": message}})
