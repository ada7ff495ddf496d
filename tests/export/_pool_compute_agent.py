"""An agent whose worker processes only compute, for the process tests.

    python tests/export/_pool_compute_agent.py TOOLS_URL

A ``Pool`` of two forked workers squares numbers (no step), then a ``run()`` block fetches
one order.
"""

from __future__ import annotations

import multiprocessing
import sys

import httpx

import otel_replay


def square(number: int) -> int:
    return number * number


def main() -> None:
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print(pool.map(square, range(6)), flush=True)
    with otel_replay.run("lookup"), httpx.Client(base_url=sys.argv[1]) as client:
        client.get("/orders/A-0001").raise_for_status()


if __name__ == "__main__":
    main()
