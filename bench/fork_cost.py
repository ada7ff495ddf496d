"""Fork cost: a fork with one override beside the plain replay of the same run, in-process.

The run is ``replay_speed``'s: 30 or 300 distinct 8 KB Chat Completions requests with 4 KB
answers, served to a plain ``httpx.Client()``. Each pass is a whole ``replaying()`` block
(the plan built and checked against the run, the session, every request served): once plain,
once with ``override={middle step: a provider response body}`` (the recorded body itself, so
that every answer can still be checked). Passes alternate, so drift in the machine's speed
touches both alike; the figure is the median pass of each.

Target: the fork at most 1.1x the plain replay.

    python bench/fork_cost.py [--sizes 30,300] [--passes 40]
"""

from __future__ import annotations

import argparse
import statistics
import time

import httpx
from replay_speed import HEADERS, URL, Interactions, _interactions, _run

import otel_replay
from otel_replay.replay import Run

TARGET_RATIO = 1.1


def _pass(
    client: httpx.Client, run: Run, interactions: Interactions, override: dict[int, object]
) -> float:
    """Seconds for one whole replay of ``run`` (a fork when ``override`` says so)."""
    started = time.perf_counter()
    with otel_replay.replaying(run, override=override) as result:
        answers = [
            client.post(URL, content=body, headers=HEADERS).read() for body, _ in interactions
        ]
    elapsed = time.perf_counter() - started
    if answers != [expected for _, expected in interactions] or not result.identical:
        raise SystemExit("a replay served another answer than recorded")
    return elapsed


def measure(size: int, passes: int) -> tuple[float, float]:
    """Median ms of a plain replay and of a fork with one override, for a run of ``size``."""
    interactions = _interactions(size)
    run = _run(interactions)
    middle = size // 2
    override: dict[int, object] = {middle: interactions[middle][1]}
    plain: list[float] = []
    forked: list[float] = []
    with httpx.Client() as client:
        _pass(client, run, interactions, {})
        _pass(client, run, interactions, override)
        for _ in range(passes):
            plain.append(_pass(client, run, interactions, {}))
            forked.append(_pass(client, run, interactions, override))
    return statistics.median(plain) * 1e3, statistics.median(forked) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="30,300")
    parser.add_argument("--passes", type=int, default=40)
    args = parser.parse_args()
    print(f"{'steps':>6} {'plain ms':>10} {'fork ms':>10} {'ratio':>7}  target <= {TARGET_RATIO}x")
    for size in (int(s) for s in args.sizes.split(",")):
        plain, forked = measure(size, args.passes)
        ratio = forked / plain
        verdict = "ok" if ratio <= TARGET_RATIO else "OVER"
        print(f"{size:>6} {plain:>10.2f} {forked:>10.2f} {ratio:>6.2f}x  {verdict}")


if __name__ == "__main__":
    main()
