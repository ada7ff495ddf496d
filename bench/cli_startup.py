"""CLI start-up: the wall time of ``otel-replay`` in a subprocess, beside the interpreter's own.

Each command runs ``--repeat`` times (after one warm-up run); printed are the median wall time,
the median CPU time of the process (what a busy machine inflates least), the wall time's ratio
to ``python -c pass`` (the floor: an interpreter that imports nothing) and the target. The CLI
runs with its modules compiled once (``PYTHONPYCACHEPREFIX``), as an installed package's are,
whatever ``PYTHONDONTWRITEBYTECODE`` says.

``runs`` and ``show`` read a store of ``--runs`` runs (3 steps each), written in bulk through
the store's own writer as ``bench/store_fleet.py`` writes it, in ``/dev/shm`` when there is one
(a minute or two at 100,000 runs: ``--store DIR`` writes it there once and reuses it);
``show`` shows the run in the middle. Also printed: how many modules each command loads, and
the top-level ones ``import otel_replay`` and the CLI's group (``--version``) load.

    python bench/cli_startup.py [--runs 100000] [--repeat 9] [--store DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.store_fleet import build
from otel_replay.store import Store

CLI = str(Path(sys.executable).with_name("otel-replay"))
TARGETS = {"--version": 0.25, "--help": 0.25, "runs": 0.5, "show RUN": 0.2, "show RUN --json": 0.2}

_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
_PROBE = """
import sys
from otel_replay.cli.main import main
sys.argv = ["otel-replay", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(len(sys.modules), file=sys.stderr)
"""


@dataclass(frozen=True)
class Timing:
    """Seconds of each run of a command: wall time, and the CPU time of the process."""

    wall: list[float]
    cpu: list[float]


def timed(command: list[str], repeat: int) -> Timing:
    """``repeat`` runs of ``command`` (which must succeed), after a warm-up run."""
    subprocess.run(command, capture_output=True, check=True, env=_ENV)
    timing = Timing([], [])
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True, env=_ENV)
        timing.wall.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        timing.cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return timing


def modules(args: list[str], where: Path) -> int:
    """How many modules ``otel-replay ARGS`` has loaded when it is done, run in ``where``
    (the package is not looked for in the current directory, as the CLI does not)."""
    command = [sys.executable, "-c", _PROBE, *args]
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=_ENV, cwd=where)
    return int(done.stderr.split()[-1])


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
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--store", type=Path, help="where to keep the store (reused if there)")
    args = parser.parse_args()

    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    root = Path(tempfile.mkdtemp(prefix="otel-replay-bench-", dir=shm))
    _ENV["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    print(f"load before: {os.getloadavg()[0]:.1f}")
    try:
        folder = args.store or root / "store"
        if not folder.exists():
            started = time.perf_counter()
            build(folder, 0, args.runs, 3)
            took = time.perf_counter() - started
            print(f"store of {args.runs:,} runs x 3 steps written in {took:.0f} s")
        with Store.open(folder, create=False) as store:
            count = store.run_count()
            middle = sorted(store.run_ids())[count // 2]
        print(f"store {folder}: {count:,} runs; show shows {middle}")
        store_args = ["--store", str(folder)]
        verbs = {
            "--version": ["--version"],
            "--help": ["--help"],
            "runs": ["runs", *store_args],
            "runs --limit 50 --json": ["runs", "--limit", "50", "--json", *store_args],
            "show RUN": ["show", middle, *store_args],
            "show RUN --json": ["show", middle, "--json", *store_args],
        }
        figures = {"python -c pass": timed([sys.executable, "-c", "pass"], args.repeat)}
        figures.update({name: timed([CLI, *verb], args.repeat) for name, verb in verbs.items()})
        counts = {name: modules(verb, root) for name, verb in verbs.items()}
    finally:
        shutil.rmtree(root, ignore_errors=True)

    floor = statistics.median(figures["python -c pass"].wall)
    print(f"{args.repeat} runs of each, in a subprocess (median wall time, and its CPU time)")
    print(f"  {'command':<34} {'wall':>8} {'cpu':>8} {'/ floor':>8} {'modules':>8}  target (wall)")
    for name, timing in figures.items():
        wall = statistics.median(timing.wall)
        target = TARGETS.get(name)
        verdict = (
            "" if target is None else f"{target:.2f} s: {'met' if wall <= target else 'MISSED'}"
        )
        shown = name if name.startswith("python") else f"otel-replay {name}"
        cpu = statistics.median(timing.cpu)
        count = f"{counts[name]:>8}" if name in counts else " " * 8
        print(f"  {shown:<34} {wall:>7.3f}s {cpu:>7.3f}s {wall / floor:>7.1f}x {count}  {verdict}")
    print(f"load after: {os.getloadavg()[0]:.1f}")
    print("loaded by import otel_replay:", " ".join(loaded("import otel_replay")))
    cli = loaded("from otel_replay.cli.main import cli")
    print(f"loaded by the CLI's group (--version, --help): {len(cli)}:", " ".join(cli))


if __name__ == "__main__":
    main()
