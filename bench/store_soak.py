"""Store soak: one process records many model calls, then ``otel-replay verify`` checks it.

The child (``tests/store/_soak_agent.py``) runs under the real ``opentelemetry-instrument``
with ``OTEL_TRACES_EXPORTER=replay`` and makes ``--calls`` chat completions through the real
openai SDK against the local stand-in (``examples/standin``), 20 turns per run. Printed: the
recording's wall time, the time its tracer provider's shutdown took (the exporter writes
what is left, closes the store, and merges what the session wrote within its budget) beside
the shutdown timeout, the store's packs and record files (what the shutdown left for gc to
merge), and the exit status, time and output of ``otel-replay verify`` (0 and no problem
expected), ``gc`` (which merges what the shutdown left) and ``verify`` again.

    python bench/store_soak.py [--calls 20000] [--store DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from importlib.metadata import entry_points
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from examples.standin import StandIn

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "tests" / "store" / "_soak_agent.py"
BIN = Path(sys.executable).parent


def _env(store: Path) -> dict[str, str]:
    others = {ep.name for ep in entry_points(group="opentelemetry_instrumentor")} - {"otel_replay"}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
    return env | {
        "OTEL_SERVICE_NAME": "soak",
        "OTEL_TRACES_EXPORTER": "replay",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": ",".join(sorted(others)),
        "OTEL_REPLAY_STORE": str(store),
        "PYTHONPATH": str(ROOT),
    }


def _cli(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``otel-replay ARGS``, and the seconds it took."""
    started = time.monotonic()
    done = subprocess.run(
        [str(BIN / "otel-replay"), *args], capture_output=True, text=True, check=False
    )
    return done, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--store", type=Path, help="default: a temporary directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, StandIn(event_delay=0.0) as standin:
        store = args.store or Path(tmp) / "store"
        started = time.monotonic()
        child = subprocess.run(
            [
                *(str(BIN / "opentelemetry-instrument"), sys.executable, str(AGENT)),
                *(standin.openai_base_url, str(args.calls)),
            ],
            env=_env(store),
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.monotonic() - started
        if child.returncode:
            sys.exit(f"the recording failed ({child.returncode}):\n{child.stderr}")
        shutdown = float(child.stdout.split("shutdown ")[1].split()[0])
        packs = len(list(store.rglob("*.pack")))
        records = len([p for p in (store / "runs").rglob("*") if p.is_file()])
        print(f"recorded {args.calls} calls in {wall:.1f} s ({args.calls / wall:.0f} calls/s)")
        print(f"shutdown: {shutdown:.2f} s (the exporter's timeout: 10 s by default)")
        print(f"store: {packs} packs, {records} record files")
        if child.stderr.strip():
            print("child stderr:", child.stderr.strip()[-2000:])
        for title, verb in (("verify", "verify"), ("gc", "gc"), ("verify after gc", "verify")):
            done, seconds = _cli(verb, "--store", str(store))
            print(f"{title}: exit {done.returncode} in {seconds:.1f} s")
            print(done.stdout.strip()[-3000:], done.stderr.strip()[-3000:])


if __name__ == "__main__":
    main()
