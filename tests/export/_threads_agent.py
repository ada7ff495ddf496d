"""An agent that hands its calls to threads inside a ``run()`` block, for the thread tests.

    python tests/export/_threads_agent.py one|two

``one``: in ``run("threads")`` it draws a ticket (``otel_replay.uuid4``), then a
``ThreadPoolExecutor`` runs a write tool (``refund_order``, which appends a line to
``$AGENT_WRITES``) for two orders and fetches two orders (``$STANDIN_URL/tools/...``), a
``threading.Thread`` refunds a third and asks the model (the real openai SDK), and
``loop.run_in_executor`` fetches a third. ``two``: two threads each open a ``run()`` block of
their own (``r_threads_a``, ``r_threads_b``, open at once) and hand two fetches to a pool.
It prints what it got, one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai

import otel_replay


@otel_replay.tool(effect="write")
def refund_order(order_id: str) -> dict[str, str]:
    with open(os.environ["AGENT_WRITES"], "a") as writes:
        writes.write(f"refund {order_id}\n")
    return {"refunded": order_id}


def fetch(order_id: str) -> str:
    url = f"{os.environ['STANDIN_URL']}/tools/orders/{order_id}"
    return str(httpx.get(url).json()["status"])


def ask(question: str) -> str:
    base = f"{os.environ['STANDIN_URL']}/v1"
    with openai.OpenAI(base_url=base, api_key="sk-threads", max_retries=0) as client:
        answer = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": question}], seed=7
        )
    return answer.choices[0].message.content or ""


def one() -> dict[str, Any]:
    got: dict[str, Any] = {}
    with otel_replay.run("threads"):
        got["ticket"] = str(otel_replay.uuid4())
        with ThreadPoolExecutor(2) as pool:
            got["refunds"] = list(pool.map(refund_order, ["A-1001", "A-1002"]))
            got["statuses"] = list(pool.map(fetch, ["A-1234", "B-2345"]))

        def in_thread() -> None:
            got["thread"] = [refund_order("A-1003"), ask("Where is my order A-1003?")]

        thread = threading.Thread(target=in_thread)
        thread.start()
        thread.join()

        async def in_executor() -> str:
            return await asyncio.get_running_loop().run_in_executor(None, fetch, "C-3456")

        got["executor"] = asyncio.run(in_executor())
    return got


def two() -> dict[str, Any]:
    got: dict[str, Any] = {}
    both_open = threading.Barrier(2)

    def block(name: str, orders: list[str]) -> None:
        with otel_replay.run(name, run_id=f"r_threads_{name}"):
            both_open.wait(30)
            with ThreadPoolExecutor(2) as pool:
                got[name] = list(pool.map(fetch, orders))
            both_open.wait(30)

    threads = [
        threading.Thread(target=block, args=("a", ["A-1234", "A-2345"])),
        threading.Thread(target=block, args=("b", ["B-1234", "B-2345"])),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return got


if __name__ == "__main__":
    print(json.dumps(one() if sys.argv[1] == "one" else two(), sort_keys=True))
