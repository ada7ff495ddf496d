"""An agent that hands work to forked worker processes (``ProcessPoolExecutor``), each making
HTTP calls, for the process tests.

    python tests/export/_pool_agent.py TOOLS_URL

It fetches one order itself, then six in two workers; multiprocessing's children leave
through ``os._exit`` once their work is done, never running ``atexit``.
"""

from __future__ import annotations

import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor

import httpx


def fetch(number: int) -> int:
    with httpx.Client(base_url=sys.argv[1]) as client:
        return client.get(f"/orders/A-{1000 + number}").status_code


def main() -> None:
    with httpx.Client(base_url=sys.argv[1]) as client:
        client.get("/orders/A-0001").raise_for_status()
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(2, mp_context=context) as pool:
        print(list(pool.map(fetch, range(6))), flush=True)


if __name__ == "__main__":
    main()
