"""Store size across runs: 80 runs x 20 turns of one agent, and flush size.

The runs are ``bench/_chat.py``'s support agent, every run sharing one system prompt and tool
list (as the runs of one agent do) and differing in everything else.

* Recorded for real: ``ReplayInstrumentor`` on an SDK ``TracerProvider`` whose batch
  processor feeds ``ReplaySpanExporter(path)``; an httpx client posts each request through an
  in-process ``httpx.MockTransport`` that answers the recorded response; each run is an
  ``otel_replay.run()`` block. Once *in order* (one run after another, on one thread) and once
  *concurrently* (80 threads, one run each), then the provider is shut down (the exporter
  closes the store, which merges what it wrote). The store's size is taken after a
  ``force_flush`` (as written), after the shutdown (whose merge is bounded in time, so it
  varies with the machine's load) and after ``Store.compact()`` (all merged, as gc keeps
  it). Concurrent / in order compares the two; raw / store compares the request and response
  bodies with the store.
* The archive: the same spans as the Collector's file exporter writes them (``_archive``: OTLP
  JSON, one line per batch of 512, in the order they ended), raw, ``zstd -3`` and ``zstd -19
  --long``, in order and concurrently, and the store (whole directory, shut down) against it.
* Floors: the same content as one zstd stream (``_chat.stream_floor``): bodies, bodies and
  the facts a replay needs, with the spans less what the store rebuilds from the bodies (what
  it must keep: "spans kept"), and with the spans as given; each also against the zstd-3
  archive, beside the store's target.
* Flush size: the same steps and spans put straight into a ``Store``, flushed after every
  step, then after every 8 steps (runs one after another); the sizes and their difference.

    python bench/store_dedup.py [--runs 80] [--turns 20] [--batch 8]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import otel_replay
from bench._archive import archive_sizes, otlp_json
from bench._chat import conversation, raw_bytes, shared_prompt, stream_floor
from bench.store_ratio import where_bytes_go
from otel_replay.capture.instrumentor import ReplayInstrumentor
from otel_replay.export import ReplaySpanExporter
from otel_replay.export._encode import span_to_dict
from otel_replay.step import Step
from otel_replay.store import Store

TARGET_CONCURRENT = 1.2
TARGET_ARCHIVE = 0.5
TARGET_RAW = 40.0
TARGET_FLUSH_SIZE = 0.10
HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench-not-a-secret"}


@dataclass(frozen=True)
class Sizes:
    """A store's bytes: packs + record files (the steps), and the whole directory."""

    steps: int
    total: int
    files: int


def sizes(folder: Path) -> Sizes:
    steps = total = files = 0
    for dirpath, _, names in os.walk(folder):
        for name in names:
            path = Path(dirpath) / name
            size = path.stat().st_size
            rel = path.relative_to(folder).as_posix()
            total += size
            files += 1
            if rel.startswith(("objects/", "runs/")):
                steps += size
    return Sizes(steps, total, files)


class Archive(SpanProcessor):
    """The spans in the order they end, as the Collector's file exporter would get them."""

    def __init__(self) -> None:
        self.spans: list[dict] = []
        self._lock = threading.Lock()

    def on_end(self, span: ReadableSpan) -> None:
        encoded = span_to_dict(span)
        with self._lock:
            self.spans.append(encoded)


@dataclass(frozen=True)
class Recording:
    written: Sizes
    """After ``force_flush``: what the flushes wrote."""
    closed: Sizes
    """After the provider's shutdown (the store merged what the session wrote)."""
    compacted: Sizes
    """After ``Store.compact()`` (everything merged, no time limit)."""
    seconds: float
    shutdown_s: float
    stored: int
    lost: int
    where: list[str]
    """Where the bytes go once shut down (``store_ratio.where_bytes_go``)."""
    content: int
    """Compressed bytes of the chunks, as the packs hold them."""
    archive: dict[str, int]
    """The same spans as the Collector's OTLP JSON file: raw, zstd -3, zstd -19 --long."""


def record_instrumented(runs: list[list[Step]], folder: Path, concurrent: bool) -> Recording:
    """Make every run's calls through the instrumented client; see the module docstring."""
    answers = {hashlib.sha256(s.request_body).digest(): s.response_body for r in runs for s in r}

    def answer(request: httpx.Request) -> httpx.Response:
        body = answers[hashlib.sha256(request.content).digest()]
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    def one(steps: list[Step]) -> None:
        with (
            httpx.Client(
                transport=httpx.MockTransport(answer), base_url="https://api.openai.com/v1"
            ) as client,
            otel_replay.run("support-agent", run_id=steps[0].run_id),
        ):
            for step in steps:
                client.post("/chat/completions", content=step.request_body, headers=HEADERS)

    provider = TracerProvider()
    exporter = ReplaySpanExporter(str(folder))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    archive = Archive()
    provider.add_span_processor(archive)
    instrumentor = ReplayInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    started = time.perf_counter()
    try:
        if concurrent:
            threads = [threading.Thread(target=one, args=(steps,)) for steps in runs]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        else:
            for steps in runs:
                one(steps)
        assert provider.force_flush(600_000)
        seconds = time.perf_counter() - started
    finally:
        instrumentor.uninstrument()
    written = sizes(folder)
    stats = exporter.stats()
    started = time.perf_counter()
    provider.shutdown()
    shutdown_s = time.perf_counter() - started
    closed = sizes(folder)
    with Store.open(folder, create=False) as store:
        stored = sum(run.step_count for run in store.runs())
        # What the shutdown's bounded merge left, merged: the store as gc keeps it.
        store.compact()
    compacted = sizes(folder)
    lost = stats.dropped + exporter.stats().failed
    where, content = where_bytes_go(folder)
    sizes_of_archive = archive_sizes(otlp_json(archive.spans))
    return Recording(
        written,
        closed,
        compacted,
        seconds,
        shutdown_s,
        stored,
        lost,
        where,
        content,
        sizes_of_archive,
    )


def record_batches(
    runs: list[tuple[list[Step], list[dict]]], folder: Path, batch: int
) -> tuple[Sizes, Sizes, str]:
    """Put every step with its span, flushing after every ``batch`` steps; the sizes before
    and after the store is closed, and its index's pages once closed."""
    with Store.open(folder) as store:
        waiting = 0
        for steps, spans in runs:
            for step, span in zip(steps, spans, strict=False):
                store.put([step], [span])
                waiting += 1
                if waiting == batch:
                    store.flush()
                    waiting = 0
            store.put(spans=spans[len(steps) :])
        store.flush()
        written = sizes(folder)
    closed = sizes(folder)
    return written, closed, where_bytes_go(folder)[0][2]


def _ratio_row(label: str, figure: float, target: str) -> str:
    return f"  {label:<44} {figure:>10.2f}x   {target}"


def _size_row(label: str, value: Sizes, raw: int) -> str:
    return (
        f"  {label:<44} {value.steps:>12,} B {raw / value.steps:6.1f}x"
        f" {value.total:>12,} B {raw / value.total:6.1f}x {value.files:>6}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=80)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--batch", type=int, default=8, help="steps per flush, against 1")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    prompt = shared_prompt(args.seed)
    runs = [
        conversation(args.turns, args.seed + 1 + n, f"run-{n:03d}", prompt)
        for n in range(args.runs)
    ]
    raw = sum(raw_bytes(steps) for steps, _ in runs)
    with tempfile.TemporaryDirectory(prefix="otel-replay-bench-") as tmp:
        root = Path(tmp)
        steps_only = [steps for steps, _ in runs]
        in_order = record_instrumented(steps_only, root / "in-order", concurrent=False)
        together = record_instrumented(steps_only, root / "concurrent", concurrent=True)
        one_written, one_closed, one_index = record_batches(runs, root / "flush-1", 1)
        many_written, many_closed, many_index = record_batches(runs, root / "flush-n", args.batch)

    steps = args.runs * args.turns
    print(
        f"{args.runs} runs x {args.turns} turns sharing a system prompt and tools: {steps} steps, "
        f"raw request+response bodies {raw:,} B"
    )
    print()
    print(
        f"  {'':<44} {'packs+records':>14} {'raw/that':>7} {'whole dir':>14} {'raw/that':>7}"
        f" {'files':>6}"
    )
    for label, rec in (("in order", in_order), (f"concurrent ({args.runs} threads)", together)):
        print(_size_row(f"{label}, after force_flush", rec.written, raw))
        print(_size_row(f"{label}, after shutdown", rec.closed, raw))
        print(_size_row(f"{label}, compacted", rec.compacted, raw))
    for label, rec in (("in order", in_order), ("concurrent", together)):
        print(
            f"  {label}: {rec.seconds:.2f} s recording ({steps / rec.seconds:,.0f} steps/s), "
            f"shutdown {rec.shutdown_s:.2f} s; stored {rec.stored}/{steps}, lost {rec.lost}"
        )
        print("    where the bytes go, compacted:")
        for line in rec.where:
            print(f"      {line}")
    print()
    print("  the Collector's OTLP JSON file of the same spans (one line per batch of 512):")
    print(f"  {'':<44} {'in order':>14} {'concurrent':>14}")
    for key in in_order.archive:
        print(f"  {key:<44} {in_order.archive[key]:>12,} B {together.archive[key]:>12,} B")
    print(
        f"  {'store, whole dir, shut down':<44} {in_order.closed.total:>12,} B"
        f" {together.closed.total:>12,} B"
    )
    print(
        f"  {'store, whole dir, compacted':<44} {in_order.compacted.total:>12,} B"
        f" {together.compacted.total:>12,} B"
    )
    print()
    print(f"  {'':<44} {'figure':>11}   target")
    for label, rec in (("in order", in_order), ("concurrent", together)):
        print(
            _ratio_row(
                f"store / zstd-3 archive ({label})",
                rec.closed.total / rec.archive["zstd -3"],
                f"<= {TARGET_ARCHIVE}x",
            )
        )
        print(
            _ratio_row(
                f"store / zstd-19 --long archive ({label})",
                rec.closed.total / rec.archive["zstd -19 --long"],
                "",
            )
        )
        print(
            _ratio_row(
                f"compacted store / zstd-3 archive ({label})",
                rec.compacted.total / rec.archive["zstd -3"],
                "",
            )
        )
    print(
        _ratio_row(
            "concurrent / in order (whole dir, shut down)",
            together.closed.total / in_order.closed.total,
            f"<= {TARGET_CONCURRENT}x",
        )
    )
    print(
        _ratio_row(
            "concurrent / in order (packs+records)",
            together.closed.steps / in_order.closed.steps,
            "",
        )
    )
    print(
        _ratio_row(
            "concurrent / in order (after force_flush)",
            together.written.total / in_order.written.total,
            "",
        )
    )
    print(_ratio_row("raw / store (in order, whole dir)", raw / in_order.closed.total, ""))
    print(
        _ratio_row(
            "raw / store (concurrent, whole dir)",
            raw / together.closed.total,
            f">= {TARGET_RAW:.0f}x",
        )
    )
    print(_ratio_row("raw / chunks alone (in order)", raw / in_order.content, ""))
    print(_ratio_row("raw / chunks alone (concurrent)", raw / together.content, ""))
    floors = stream_floor(runs)
    for label, size in floors.items():
        print(_ratio_row(f"floor, {label}: raw / that", raw / size, ""))
    # What no zstd-built store of the same facts goes under, against the archive's target.
    for label, size in floors.items():
        print(
            _ratio_row(
                f"floor, {label} / zstd-3",
                size / in_order.archive["zstd -3"],
                f"(store target {TARGET_ARCHIVE}x)",
            )
        )
    print()
    print(f"flush size: the same steps and spans put straight into a Store ({steps} steps)")
    print(
        f"  {'':<44} {'packs+records':>14} {'raw/that':>7} {'whole dir':>14} {'raw/that':>7}"
        f" {'files':>6}"
    )
    print(_size_row("1 step per flush, before close", one_written, raw))
    print(_size_row(f"{args.batch} steps per flush, before close", many_written, raw))
    print(_size_row("1 step per flush, closed", one_closed, raw))
    print(_size_row(f"{args.batch} steps per flush, closed", many_closed, raw))
    print(f"  1 step per flush, closed: {one_index}")
    print(f"  {args.batch} steps per flush, closed: {many_index}")
    print(f"  {'':<44} {'figure':>11}   target")
    closed = one_closed.total / many_closed.total - 1
    print(
        f"  {'difference, closed (whole dir)':<44} {closed:>+10.1%}    "
        f"|x| <= {TARGET_FLUSH_SIZE:.0%}"
    )
    closed_steps = one_closed.steps / many_closed.steps - 1
    print(f"  {'difference, closed (packs+records)':<44} {closed_steps:>+10.1%}")
    before = one_written.total / many_written.total - 1
    print(f"  {'difference, before close (whole dir)':<44} {before:>+10.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
