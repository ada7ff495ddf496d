"""Store at scale: the index of 3,000 runs x 10 steps, one run of 1,000 steps, and memory at
exporter shutdown.

* Index — 3,000 runs of ``bench/_chat.py``'s agent (10 turns each, one shared system prompt
  and tool list, spans included), each recorded by a store opening of its own, as separate
  recording processes would (``put``, ``flush``, ``close``). Printed: the time per run
  recorded (first and last tenth: does recording slow down as the store grows), the index's
  size (pages by table) beside the packs and records, and the time of ``otel-replay runs
  --store S --json`` and ``otel-replay show RUN --store S --json`` (subprocesses, best of 3)
  against ``otel-replay --help`` (the interpreter and CLI start-up, the baseline), and of
  ``Store.runs()`` in process (best of 3) against ``Store.open`` and ``close``.
* A long run — one run of 1,000 one-turn chat steps (``bench/_chat.py``'s, ~3 KB each), put
  and flushed 20 at a time as the exporter's batches are, without step spans (as a capture
  without content: ``show`` then reads every step's record). Printed: the seconds of
  ``otel-replay show RUN --json`` and ``otel-replay report RUN`` (subprocesses) and of
  ``load_run`` in process (what ``replay`` loads); each grows linearly with the steps.
* Memory at shutdown — in a child process: 5,000 steps of 20 KB (a 16 KB request, mostly new
  text, and a 4 KB response; 20 steps per ``run()`` block) recorded through the instrumentor
  and a ``ReplaySpanExporter`` behind the SDK's batch processor, then ``provider.shutdown()``.
  A thread samples VmRSS (``/proc/self/status``) every 10 ms; printed are the peak while
  recording, the peak during the shutdown (which writes what is left, closes the store and
  merges what the session wrote), their ratio, and ``ru_maxrss`` before and after shutdown.

    python bench/store_scale.py [--runs 3000] [--steps 10] [--long-steps 1000]
                                [--memory-steps 5000]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import closing
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._chat import conversation, raw_bytes, shared_prompt, text
from otel_replay.replay.sources import load_run
from otel_replay.store import Store

TARGET_SHUTDOWN = 2.0
CLI = [str(Path(sys.executable).with_name("otel-replay"))]
if not Path(CLI[0]).exists():
    CLI = [sys.executable, "-m", "otel_replay.cli.main"]


# -- the index at scale -----------------------------------------------------------------------


def build(folder: Path, runs: int, steps: int, seed: int) -> tuple[list[float], int, str]:
    """Record ``runs`` runs, one store opening each; seconds per run, raw bytes, a run id
    from the middle."""
    prompt = shared_prompt(seed)
    seconds: list[float] = []
    raw = 0
    for n in range(runs):
        run_steps, spans = conversation(steps, seed + 1 + n, f"r_20261121T0900_{n:06d}", prompt)
        raw += raw_bytes(run_steps)
        started = time.perf_counter()
        with Store.open(folder) as store:
            store.put(run_steps, spans)
            store.flush()
        seconds.append(time.perf_counter() - started)
    return seconds, raw, f"r_20261121T0900_{runs // 2:06d}"


def best_of(runs: int, action: object) -> float:
    """Seconds of the fastest of ``runs`` calls of ``action``."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        action()  # type: ignore[operator]
        best = min(best, time.perf_counter() - started)
    return best


def cli(*args: str) -> int:
    """Run the CLI; the bytes it printed (it must succeed)."""
    done = subprocess.run([*CLI, *args], capture_output=True, check=True)
    return len(done.stdout)


def index_pages(folder: Path) -> tuple[int, str]:
    """The index file's bytes, and its pages by table."""
    path = folder / "index.sqlite"
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn, conn:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        try:
            pages = conn.execute(
                "SELECT name, count(*) FROM dbstat GROUP BY name ORDER BY count(*) DESC LIMIT 5"
            ).fetchall()
        except sqlite3.Error:  # an SQLite built without dbstat
            pages = []
    listed = ", ".join(f"{name} {n}" for name, n in pages)
    return path.stat().st_size, f"{size} B pages: {listed}, ...; {free} free"


def scale(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="otel-replay-bench-") as tmp:
        folder = Path(tmp) / "store"
        started = time.perf_counter()
        seconds, raw, middle = build(folder, args.runs, args.steps, args.seed)
        built = time.perf_counter() - started
        index, pages = index_pages(folder)
        packs = sum(p.stat().st_size for p in (folder / "objects").rglob("*.pack"))
        records = sum(p.stat().st_size for p in (folder / "runs").rglob("*.rec"))
        store_s = best_of(3, lambda: Store.open(folder).close())
        with Store.open(folder) as store:
            assert len(store.runs()) == args.runs
            runs_s = best_of(3, store.runs)
        help_s = best_of(3, lambda: cli("--help"))
        runs_cli_s = best_of(3, lambda: cli("runs", "--store", str(folder), "--json"))
        show_cli_s = best_of(3, lambda: cli("show", middle, "--store", str(folder), "--json"))
        runs_out = cli("runs", "--store", str(folder), "--json")
        show_out = cli("show", middle, "--store", str(folder), "--json")

    steps = args.runs * args.steps
    tenth = max(1, len(seconds) // 10)
    first = sum(seconds[:tenth]) / tenth
    last = sum(seconds[-tenth:]) / tenth
    print(f"index at {args.runs:,} runs x {args.steps} steps ({steps:,} steps, raw {raw:,} B)")
    print(
        f"  recorded in {built:.0f} s; per run (open, put, flush, close): first tenth "
        f"{first * 1e3:.1f} ms, last tenth {last * 1e3:.1f} ms ({last / first:.2f}x)"
    )
    print(f"  {'':<44} {'figure':>14}  {'per run':>9} {'per step':>9}  baseline / ratio")
    print(
        f"  {'index.sqlite':<44} {index:>12,} B  {index / args.runs:>7,.0f} B "
        f"{index / steps:>7,.0f} B  packs + records {packs + records:,} B: "
        f"{index / (packs + records):.2f}x"
    )
    print(f"  {'':<44} ({pages})")
    print(
        f"  {'Store.runs() in process':<44} {runs_s * 1e3:>11.1f} ms  "
        f"{runs_s / args.runs * 1e6:>6.1f} µs {'':>9}  Store.open+close {store_s * 1e3:.1f} ms: "
        f"{runs_s / store_s:.1f}x"
    )
    print(
        f"  {'otel-replay runs --json (best of 3)':<44} {runs_cli_s * 1e3:>11.0f} ms  "
        f"{runs_cli_s / args.runs * 1e6:>6.0f} µs {'':>9}  --help {help_s * 1e3:.0f} ms: "
        f"{runs_cli_s / help_s:.1f}x ({runs_out:,} B printed)"
    )
    print(
        f"  {'otel-replay show RUN --json (best of 3)':<44} {show_cli_s * 1e3:>11.0f} ms  "
        f"{'':>9} {show_cli_s / args.steps * 1e3:>6.1f} ms  --help {help_s * 1e3:.0f} ms: "
        f"{show_cli_s / help_s:.1f}x ({show_out:,} B printed)"
    )


# -- one long run -----------------------------------------------------------------------------


def long_run(args: argparse.Namespace) -> None:
    run_id = "r_20261121T0900_long"
    with tempfile.TemporaryDirectory(prefix="otel-replay-bench-") as tmp:
        folder = Path(tmp) / "store"
        with Store.open(folder) as store:
            for start in range(0, args.long_steps, 20):
                batch = [
                    dataclasses.replace(conversation(1, args.seed + n, run_id)[0][0], index=n)
                    for n in range(start, min(start + 20, args.long_steps))
                ]
                store.put(batch, [])
                store.flush()
        where = ("--store", str(folder))
        show_s = best_of(1, lambda: cli("show", run_id, "--json", *where))
        report = str(Path(tmp) / "report.html")
        report_s = best_of(1, lambda: cli("report", run_id, "-o", report, *where))
        load_s = best_of(1, lambda: load_run(run_id, store=str(folder)))
    print(f"one run of {args.long_steps:,} steps")
    for name, seconds in (
        ("otel-replay show RUN --json", show_s),
        ("otel-replay report RUN", report_s),
        ("load_run (replay's loading) in process", load_s),
    ):
        print(f"  {name:<44} {seconds:>10.2f} s")


# -- memory at shutdown (child process) -------------------------------------------------------


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Sampler:
    """Samples VmRSS every 10 ms into the peak of the current phase."""

    def __init__(self) -> None:
        self.phase = "base"
        self.peaks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.sample()

    def sample(self) -> None:
        rss = _rss_kb()
        self.peaks[self.phase] = max(self.peaks.get(self.phase, 0), rss)

    def enter(self, phase: str) -> None:
        self.sample()
        self.phase = phase
        self.sample()

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sample()
        self._stop.set()
        self._thread.join()


def memory_child(args: argparse.Namespace) -> None:
    """Record through the exporter and shut down; print the figures as JSON."""
    import httpx
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    import otel_replay
    from otel_replay.capture.instrumentor import ReplayInstrumentor
    from otel_replay.export import ReplaySpanExporter

    rng = random.Random(args.seed)
    system = {"role": "system", "content": text(rng, 2000)}
    answer: list[bytes] = [b""]

    def respond(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=answer[0], headers={"content-type": "application/json"})

    provider = TracerProvider()
    exporter = ReplaySpanExporter(args.memory_child)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    instrumentor = ReplayInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    client = httpx.Client(transport=httpx.MockTransport(respond), base_url="https://api.openai.com")
    headers = {"content-type": "application/json", "authorization": "Bearer sk-not-a-secret"}
    request_bytes = args.step_kb * 1024 * 4 // 5
    with Sampler() as sampler:
        sampler.enter("recording")
        started = time.perf_counter()
        for start in range(0, args.memory_steps, 20):
            with otel_replay.run("memory-agent"):
                for _ in range(min(20, args.memory_steps - start)):
                    user = {"role": "user", "content": text(rng, request_bytes - 2100)}
                    body = {"model": "gpt-4o-mini", "messages": [system, user]}
                    reply = {"choices": [{"message": {"content": text(rng, request_bytes // 4)}}]}
                    answer[0] = json.dumps(reply).encode()
                    client.post("/v1/chat/completions", json=body, headers=headers)
        recording_s = time.perf_counter() - started
        held = exporter.stats().held_bytes
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        sampler.enter("shutdown")
        started = time.perf_counter()
        provider.shutdown()
        shutdown_s = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    instrumentor.uninstrument()
    stats = exporter.stats()
    with Store.open(args.memory_child, create=False) as store:
        stored = sum(run.step_count for run in store.runs())
    files = [p for p in Path(args.memory_child).rglob("*") if p.is_file()]
    print(
        json.dumps(
            {
                "peaks_kb": sampler.peaks,
                "maxrss_kb": [before, after],
                "seconds": [recording_s, shutdown_s],
                "stored": stored,
                "lost": stats.dropped + stats.failed,
                "store_bytes": sum(p.stat().st_size for p in files),
                "packs": sum(p.suffix == ".pack" for p in files),
                "records": sum(p.suffix == ".rec" for p in files),
                "held_bytes": held,
            }
        )
    )


def memory(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="otel-replay-bench-") as tmp:
        command = [sys.executable, __file__, "--memory-child", str(Path(tmp) / "store")]
        command += ["--memory-steps", str(args.memory_steps), "--step-kb", str(args.step_kb)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            raise SystemExit(done.returncode)
        out = json.loads(done.stdout.strip().splitlines()[-1])
        shutil.rmtree(Path(tmp) / "store", ignore_errors=True)
    peaks = out["peaks_kb"]
    base, running, shutdown = peaks["base"], peaks["recording"], peaks["shutdown"]
    recording_s, shutdown_s = out["seconds"]
    steps = args.memory_steps
    print()
    print(
        f"memory at shutdown: {steps:,} steps of {args.step_kb} KB through the exporter "
        f"(child process); stored {out['stored']}/{steps}, lost {out['lost']}, "
        f"store {out['store_bytes']:,} B"
    )
    print(
        f"  the hand-off held {out['held_bytes']:,} B when recording ended; after shutdown the "
        f"store has {out['packs']} pack(s) and {out['records']} record file(s)"
    )
    print(f"  {'':<44} {'figure':>12}   target")
    print(f"  {'VmRSS before recording (baseline)':<44} {base / 1024:>9.1f} MB")
    print(
        f"  {'VmRSS peak while recording':<44} {running / 1024:>9.1f} MB   "
        f"({recording_s:.1f} s, {steps / recording_s:,.0f} steps/s)"
    )
    print(
        f"  {'VmRSS peak during provider.shutdown()':<44} {shutdown / 1024:>9.1f} MB   "
        f"({shutdown_s:.2f} s)"
    )
    print(
        f"  {'shutdown peak / recording peak':<44} {shutdown / running:>10.2f}x   "
        f"<= {TARGET_SHUTDOWN:.0f}x"
    )
    print(
        f"  {'  the same, above the baseline':<44} "
        f"{(shutdown - base) / max(1, running - base):>10.2f}x"
    )
    before, after = out["maxrss_kb"]
    print(
        f"  {'ru_maxrss before / after shutdown':<44} {before / 1024:>6.1f} / {after / 1024:.1f} MB"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--steps", type=int, default=10, help="steps per run (index)")
    parser.add_argument("--long-steps", type=int, default=1000, help="steps of the long run")
    parser.add_argument("--memory-steps", type=int, default=5000)
    parser.add_argument("--step-kb", type=int, default=20, help="request + response KB")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--skip-index", action="store_true")
    parser.add_argument("--skip-long", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args)
        return 0
    if not args.skip_index:
        scale(args)
    if not args.skip_long:
        long_run(args)
    if not args.skip_memory:
        memory(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
