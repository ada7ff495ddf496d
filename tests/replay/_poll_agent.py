"""An agent that polls a job until a deadline, sleeping between polls.

    python tests/replay/_poll_agent.py TOOLS_URL

Twice: with threads' clocks (the deadline must pass on each of ``time.monotonic()``,
``monotonic_ns()``, ``perf_counter()`` and ``perf_counter_ns()``, one of them bound by name)
and with asyncio's (``loop.time()``, ``asyncio.sleep``). Each poll is
an HTTP step. It prints how many polls each loop made, how far each clock moved, and how much
real time passed (``CLOCK_MONOTONIC`` read through ``clock_gettime``, which no replay moves).
Meanwhile a daemon thread polls too, every 50 ms, as an SDK's telemetry uploader does.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable
from time import perf_counter_ns

import httpx

PAUSE = 0.4
SPAN = 3.5 * PAUSE  # 4 polls, at 0, 0.4, 0.8 and 1.2 s: the deadline falls between two

CLOCKS: dict[str, tuple[Callable[[], float], float]] = {
    "monotonic": (time.monotonic, 1.0),
    "monotonic_ns": (time.monotonic_ns, 1e9),
    "perf_counter": (time.perf_counter, 1.0),
    "perf_counter_ns": (perf_counter_ns, 1e9),
}


def _real() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def _seconds() -> dict[str, float]:
    return {name: read() / scale for name, (read, scale) in CLOCKS.items()}


def poll_with_threads_clocks(client: httpx.Client) -> None:
    client.get("/orders/A-1999")  # a first call: connecting is not part of the loop
    real, started = _real(), _seconds()
    polls = 0
    # Any clock that did not move on would keep the loop polling.
    while any(now - started[name] < SPAN for name, now in _seconds().items()):
        client.get(f"/orders/A-{2000 + polls}").raise_for_status()
        polls += 1
        time.sleep(PAUSE)
    moved = " ".join(f"{name}={now - started[name]:.3f}" for name, now in _seconds().items())
    print(f"threads: {polls} polls", flush=True)
    print(f"threads: clocks moved {moved}", flush=True)
    print(f"threads: real {_real() - real:.3f}", flush=True)


async def poll_with_the_loops_clock(client: httpx.AsyncClient) -> None:
    loop = asyncio.get_running_loop()
    await client.get("/orders/A-2999")
    real, started = _real(), loop.time()
    polls = 0
    while loop.time() - started < SPAN:
        (await client.get(f"/orders/A-{3000 + polls}")).raise_for_status()
        polls += 1
        await asyncio.sleep(PAUSE)
    print(f"asyncio: {polls} polls", flush=True)
    print(f"asyncio: clocks moved loop.time={loop.time() - started:.3f}", flush=True)
    print(f"asyncio: real {_real() - real:.3f}", flush=True)


async def main_async(url: str) -> None:
    async with httpx.AsyncClient(base_url=url) as client:
        await poll_with_the_loops_clock(client)


def background() -> None:
    while True:
        time.sleep(0.05)


def main() -> None:
    threading.Thread(target=background, daemon=True).start()
    url = sys.argv[1]
    with httpx.Client(base_url=url) as client:
        poll_with_threads_clocks(client)
    asyncio.run(main_async(url))


if __name__ == "__main__":
    main()
