"""A program that starts a ``multiprocessing.Pool(2)`` (fork) again and again, for the worker
tests.

    python tests/export/_pool_cycles_agent.py CYCLES

Each cycle maps two tasks, each a step (``otel_replay.side_effect``), over a new pool, which
``with`` terminates (SIGTERM) as soon as the results are in. It prints how many came back.
"""

from __future__ import annotations

import multiprocessing
import sys

import otel_replay


def task(number: int) -> int:
    return otel_replay.side_effect("double", lambda: number * 2)


def main() -> None:
    context = multiprocessing.get_context("fork")
    results: list[int] = []
    for cycle in range(int(sys.argv[1])):
        with context.Pool(2) as pool:
            results += pool.map(task, [cycle * 2, cycle * 2 + 1], chunksize=1)
    print(f"results: {len(results)}", flush=True)


if __name__ == "__main__":
    main()
