"""The order database the framework agents' tools read and write (stdlib only, so the MCP
server script can use it too)."""

from __future__ import annotations

import sqlite3
import uuid
from typing import Any

QUESTIONS = ("Where is my order A-1234?", "It arrived broken, please refund order A-1234.")
SYSTEM = "You are the order desk of Northwind. Use the tools."


def open_database(path: str) -> sqlite3.Connection:
    """The order database at ``path``, created with one shipped order when missing (usable
    from any thread: frameworks run sync tools in worker threads)."""
    db = sqlite3.connect(path, check_same_thread=False)
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS orders (
            order_id TEXT PRIMARY KEY, status TEXT, total REAL, currency TEXT, item TEXT);
        CREATE TABLE IF NOT EXISTS refunds (
            refund_id TEXT PRIMARY KEY, order_id TEXT, amount REAL, reason TEXT);
        INSERT OR IGNORE INTO orders VALUES ('A-1234', 'shipped', 129.0, 'EUR', 'headphones');
        """
    )
    db.commit()
    return db


def lookup(db: sqlite3.Connection, order_id: str) -> dict[str, Any]:
    """An order as the tools return it (the read)."""
    row = db.execute(
        "SELECT order_id, status, total, currency, item FROM orders WHERE order_id = ?",
        (order_id,),
    ).fetchone()
    if row is None:
        raise LookupError(f"no order {order_id}")
    order_id, status, total, currency, item = row
    return {
        "order_id": order_id,
        "status": status,
        "total": total,
        "currency": currency,
        "items": [{"name": item, "quantity": 1}],
    }


def refund(db: sqlite3.Connection, order_id: str, reason: str) -> dict[str, Any]:
    """Refund an order in full (the write: a row in ``refunds``, the order marked refunded)."""
    total, currency = db.execute(
        "SELECT total, currency FROM orders WHERE order_id = ?", (order_id,)
    ).fetchone()
    refund_id = f"R-{uuid.uuid4().hex[:8]}"
    db.execute("INSERT INTO refunds VALUES (?, ?, ?, ?)", (refund_id, order_id, total, reason))
    db.execute("UPDATE orders SET status = 'refunded' WHERE order_id = ?", (order_id,))
    db.commit()
    return {
        "refund_id": refund_id,
        "order_id": order_id,
        "amount": total,
        "currency": currency,
        "status": "issued",
    }
