"""CLI start-up: the wall time of ``otel-replay`` in a subprocess, beside the interpreter's own.

Each command runs ``--repeat`` times (after one warm-up run, so every figure has its bytecode
cached); printed are the median wall time, the median CPU time of the process (what a busy
machine inflates least), the wall time's ratio to ``python -c pass`` (the floor: an interpreter
that imports nothing) and the target. ``runs`` reads a store of
``--runs`` runs of ``bench/_chat.py``'s agent (2 steps each), written through one store
opening (minutes on a busy machine: ``--store DIR`` writes it there once and reuses it). Also
printed: the modules ``import otel_replay`` and the CLI's group (``--version``) load.

    python bench/cli_startup.py [--runs 2000] [--repeat 9] [--store DIR]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._chat import conversation, shared_prompt
from otel_replay.store import Store

CLI = str(Path(sys.executable).with_name("otel-replay"))
TARGETS = {"--version": 0.25, "--help": 0.25, "runs": 0.5}


def build(folder: Path, runs: int) -> None:
    """Record ``runs`` runs of 2 steps into a new store at ``folder``."""
    prompt = shared_prompt(7)
    with Store.open(folder) as store:
        for n in range(runs):
            steps, spans = conversation(2, 8 + n, f"r_20261121T0900_{n:06d}", prompt)
            store.put(steps, spans)
        store.flush()


@dataclass(frozen=True)
class Timing:
    """Seconds of each run of a command: wall time, and the CPU time of the process."""

    wall: list[float]
    cpu: list[float]


def timed(command: list[str], repeat: int) -> Timing:
    """``repeat`` runs of ``command`` (which must succeed), after a warm-up run."""
    subprocess.run(command, capture_output=True, check=True)
    timing = Timing([], [])
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True)
        timing.wall.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        timing.cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return timing


def loaded(code: str) -> list[str]:
    """The top-level modules (the package's, the standard library's, third parties') that
    ``code`` loads in a new interpreter."""
    probe = (
        "import sys; before = set(sys.modules); "
        f"{code}; "
        "print('\\n'.join(sorted(m for m in set(sys.modules) - before if '.' not in m)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return done.stdout.split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--store", type=Path, help="where to keep the store (reused if there)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="otel-replay-bench-") as tmp:
        folder = args.store or Path(tmp) / "store"
        if not folder.exists():
            started = time.perf_counter()
            build(folder, args.runs)
            took = time.perf_counter() - started
            print(f"store of {args.runs:,} runs x 2 steps written in {took:.0f} s")
        with Store.open(folder, create=False) as store:
            print(f"store {folder}: {len(store.runs()):,} runs")
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "--version": [CLI, "--version"],
            "--help": [CLI, "--help"],
            "runs": [CLI, "runs", "--store", str(folder)],
            "runs --limit 20": [CLI, "runs", "--store", str(folder), "--limit", "20"],
            "runs --json": [CLI, "runs", "--store", str(folder), "--json"],
        }
        figures = {name: timed(command, args.repeat) for name, command in commands.items()}

    floor = statistics.median(figures["python -c pass"].wall)
    print(f"{args.repeat} runs of each, in a subprocess (median wall time, and its CPU time)")
    print(f"  {'command':<32} {'wall':>8} {'cpu':>8} {'wall / floor':>13}  target (wall)")
    for name, timing in figures.items():
        wall = statistics.median(timing.wall)
        target = TARGETS.get(name)
        verdict = (
            "" if target is None else f"{target:.2f} s: {'met' if wall <= target else 'MISSED'}"
        )
        shown = name if name.startswith("python") else f"otel-replay {name}"
        cpu = statistics.median(timing.cpu)
        print(f"  {shown:<32} {wall:>7.3f}s {cpu:>7.3f}s {wall / floor:>12.1f}x  {verdict}")
    print("loaded by import otel_replay:", " ".join(loaded("import otel_replay")))
    cli = loaded("from otel_replay.cli.main import cli")
    print(f"loaded by the CLI's group (--version, --help): {len(cli)}:", " ".join(cli))


if __name__ == "__main__":
    main()
