"""The index of a fleet's store: 10,000 and 100,000 runs, and what each verb costs there.

A store of N runs (3 steps each: a shared system prompt, a question of their own, a short
answer) is written through the store's own writer API in bulk (``Store.put`` of a thousand
runs, one ``flush``: no instrumentor), in a temporary directory (``/dev/shm`` when there
is one: the disk's fsyncs are not what is measured). For each N, printed side by side:

* the index's size (``index.sqlite``) and the store's;
* ``runs``: ``Store.runs(limit=50)`` in process (what the CLI's default table asks), every
  run (``Store.runs()``: what the table read before, the baseline), and ``otel-replay runs
  --store S`` (the newest 50) as a subprocess, against ``otel-replay --help`` (the
  interpreter and CLI start-up), in wall seconds and in CPU seconds (what the command costs
  on an idle machine);
* ``show``: ``Store.run`` + ``Store.steps`` + both bodies of every step of a run in the
  middle, in process, and ``otel-replay show RUN`` as a subprocess, ``--json`` and as the
  table (which loads rich);
* ``verify`` and ``gc`` (nothing expired: mark, repack, sweep), in process.

The CLI runs with its modules compiled once (``PYTHONPYCACHEPREFIX``), as an installed
package's are, whatever ``PYTHONDONTWRITEBYTECODE`` says.

Times are the best of 3 (verify and gc: one). Targets: ``runs`` <= 0.5 s and ``show`` <=
0.2 s, growing less than linearly with N.

    python bench/store_fleet.py [--sizes 10000,100000] [--steps 3] [--no-upkeep]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from otel_replay.step import RunEnd, RunFacts, Step
from otel_replay.store import Store

CLI = [str(Path(sys.executable).with_name("otel-replay"))]
BATCH = 1000
"""Runs per flush while building."""
SYSTEM = json.dumps({"role": "system", "content": "You answer questions about orders. " * 60})


def _tag(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def _step(run_id: str, index: int, start_ns: int) -> Step:
    question = json.dumps({"role": "user", "content": f"{run_id}: where is order A-{index}?"})
    request = f'{{"model":"gpt-4o-mini","messages":[{SYSTEM},{question}]}}'.encode()
    response = json.dumps({"choices": [{"message": {"content": f"On its way ({index})."}}]})
    answer = response.encode()
    begin = start_ns + index * 10**9
    return Step(
        run_id=run_id,
        index=index,
        trace_id=int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:16], "big"),
        span_id=1000 + index,
        kind="llm",
        method="POST",
        url="https://api.openai.com/v1/chat/completions",
        request_headers=[("content-type", "application/json")],
        request_body=request,
        request_hash=_tag(request),
        status_code=200,
        response_headers=[("content-type", "application/json")],
        response_body=answer,
        response_hash=_tag(answer),
        chunks=[(len(answer), 5_000_000)],
        complete=True,
        error_type=None,
        start_ns=begin,
        end_ns=begin + 5_000_000,
        provider="openai",
        model="gpt-4o-mini",
        tokens_in=40,
        tokens_out=8,
    )


def build(folder: Path, start: int, stop: int, steps: int) -> None:
    """Add runs ``start`` to ``stop`` (each its own run id, a minute apart)."""
    base = 1_790_000_000 * 10**9
    with Store.open(folder) as store:
        for first in range(start, stop, BATCH):
            for n in range(first, min(stop, first + BATCH)):
                run_id = f"r_{n:07d}"
                start = base + n * 60 * 10**9
                run = [_step(run_id, i, start) for i in range(steps)]
                # The run's facts, as a recording's first step carries them.
                run[0].run = RunFacts(run_id=run_id, mode="record", start_ns=start)
                store.put(run)
                store.end_run(RunEnd(run_id, base + n * 60 * 10**9 + steps * 10**9))
            store.flush()
        store.close(timeout=0)


def best(action: Callable[[], object], times: int = 3) -> float:
    """Seconds of the fastest of ``times`` calls of ``action``."""
    fastest = float("inf")
    for _ in range(times):
        started = time.perf_counter()
        action()
        fastest = min(fastest, time.perf_counter() - started)
    return fastest


_CLI_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
_CLI_ENV["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="store-fleet-pyc-")


def cli(*args: str) -> None:
    """Run the CLI, its modules compiled once (as an installed package's are)."""
    subprocess.run([*CLI, *args], check=True, capture_output=True, env=_CLI_ENV)


def cli_cpu(*args: str, times: int = 3) -> float:
    """CPU seconds (user + system) of the least costly of ``times`` CLI runs: what the
    command costs, whatever else the machine is doing."""
    least = float("inf")
    for _ in range(times):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        cli(*args)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        least = min(least, spent)
    return least


def measure(folder: Path, runs: int, upkeep: bool) -> dict[str, float]:
    """The figures of the store at ``folder`` holding ``runs`` runs."""
    middle = f"r_{runs // 2:07d}"
    store = str(folder)

    def show_in_process() -> None:
        with Store.open(folder) as opened:
            opened.run(middle)
            for step in opened.steps(middle):
                opened.request_body(step)
                opened.response_body(step)

    def runs_in_process(limit: int | None) -> Callable[[], object]:
        def action() -> None:
            with Store.open(folder) as opened:
                assert len(opened.runs(limit=limit)) == min(runs, limit or runs)

        return action

    figures = {
        "index_mb": (folder / "index.sqlite").stat().st_size / 1e6,
        "store_mb": sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6,
        "open_close_s": best(lambda: Store.open(folder).close()),
        "runs_50_s": best(runs_in_process(50)),
        "runs_all_s": best(runs_in_process(None)),
        "cli_help_s": best(lambda: cli("--help")),
        "cli_runs_s": best(lambda: cli("runs", "--store", store)),
        "show_s": best(show_in_process),
        "cli_show_s": best(lambda: cli("show", middle, "--store", store, "--json")),
        "cli_show_table_s": best(lambda: cli("show", middle, "--store", store)),
        "cli_help_cpu_s": cli_cpu("--help"),
        "cli_runs_cpu_s": cli_cpu("runs", "--store", store),
        "cli_show_cpu_s": cli_cpu("show", middle, "--store", store, "--json"),
        "cli_show_table_cpu_s": cli_cpu("show", middle, "--store", store),
    }
    if not upkeep:
        return figures
    with Store.open(folder) as opened:
        started = time.perf_counter()
        problems = [p for p in opened.verify() if p.damage]
        figures["verify_s"] = time.perf_counter() - started
        assert not problems, problems[:3]
        started = time.perf_counter()
        opened.gc()
        figures["gc_s"] = time.perf_counter() - started
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument(
        "--no-upkeep", action="store_true", help="skip verify and gc (minutes at 100k runs)"
    )
    args = parser.parse_args()
    sizes = sorted(int(n) for n in args.sizes.split(","))
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    root = Path(tempfile.mkdtemp(prefix="store-fleet-", dir=base))
    print(f"load before: {os.getloadavg()[0]:.1f}; {args.steps} steps a run; in {root}")
    results: dict[int, dict[str, float]] = {}
    try:
        folder = root / "store"
        built = 0
        for size in sizes:
            started = time.perf_counter()
            build(folder, built, size, args.steps)
            print(f"built {size:,} runs ({time.perf_counter() - started:.0f} s)", flush=True)
            built = size
            # gc merges and rewrites: measure on a copy, so the next size builds on the original
            copy = root / f"at-{size}"
            shutil.copytree(folder, copy)
            results[size] = measure(copy, size, not args.no_upkeep)
            shutil.rmtree(copy)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    names = list(next(iter(results.values())))
    header = f"{'':20}" + "".join(f"{n:>14,}" for n in sizes)
    if len(sizes) > 1:
        header += f"{'growth':>10}"
    print(header)
    for name in names:
        line = f"{name:20}" + "".join(f"{results[n][name]:14.3f}" for n in sizes)
        if len(sizes) > 1 and results[sizes[0]][name] > 0:
            line += f"{results[sizes[-1]][name] / results[sizes[0]][name]:9.1f}x"
        print(line)
    print(f"runs grew {sizes[-1] / sizes[0]:.0f}x. load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
