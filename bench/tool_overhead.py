"""Tool and value step overhead on the application thread.

Measured in one process, interleaved over several rounds, median round reported, both in
wall time and in the application thread's CPU time (``time.thread_time``: what the call itself
costs, unmoved by other processes on a busy machine; wall time adds the exporter thread's
turns at the GIL):

* a bare call of a small function (``lookup_order(order_id) -> dict``);
* the same body inside a plain OTel span (what any tool instrumentation costs at least);
* the same function under ``@otel_replay.tool``, recording through the real pipeline
  (instrumentor, SDK tracer provider, batch processor, ``replay`` exporter, store);
* ``otel_replay.now()`` and ``otel_replay.uuid4()`` recorded the same way.

Targets (issue 11): a tool step ≤ 2x the plain span's overhead; a value ≤ 20 µs.

Rounds are short (``--calls`` per variant, then an untimed flush) so they measure the cost on
the application thread, not the exporter's sustained throughput (bench/exporter_throughput).

    python bench/tool_overhead.py [--calls 500] [--rounds 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import otel_replay
from otel_replay.capture.instrumentor import ReplayInstrumentor
from otel_replay.export import ReplaySpanExporter
from otel_replay.runs._run import start_process_run

TARGET_TOOL_VS_SPAN = 2.0
TARGET_VALUE_US = 20.0


class _Discard(SpanExporter):
    def export(self, spans):  # type: ignore[no-untyped-def]
        return SpanExportResult.SUCCESS


def lookup(order_id: str) -> dict[str, Any]:
    return {"order_id": order_id, "status": "shipped", "total": 129.0, "items": ["headphones"]}


def _per_call_us(fn: Callable[[], Any], calls: int) -> tuple[float, float]:
    """Wall and thread CPU microseconds per call."""
    started, cpu = time.perf_counter(), time.thread_time()
    for _ in range(calls):
        fn()
    wall_us = (time.perf_counter() - started) / calls * 1e6
    return wall_us, (time.thread_time() - cpu) / calls * 1e6


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()

    plain_provider = TracerProvider()
    plain_provider.add_span_processor(BatchSpanProcessor(_Discard()))
    plain_tracer = plain_provider.get_tracer("bench")

    def in_span() -> Any:
        with plain_tracer.start_as_current_span("execute_tool lookup_order"):
            return lookup("A-1234")

    with tempfile.TemporaryDirectory() as scratch:
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(ReplaySpanExporter(Path(scratch) / "s")))
        start_process_run()
        instrumentor = ReplayInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        tool = otel_replay.tool(lookup)
        variants: dict[str, Callable[[], Any]] = {
            "bare": lambda: lookup("A-1234"),
            "plain span": in_span,
            "tool step": lambda: tool("A-1234"),
            "now()": otel_replay.now,
            "uuid4()": otel_replay.uuid4,
        }
        rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
        for fn in variants.values():
            _per_call_us(fn, 200)  # warm up: imports, schema validators, caches
        for _ in range(args.rounds):
            for name, fn in variants.items():
                rounds[name].append(_per_call_us(fn, args.calls))
                # Untimed: the exporter catches up, so no round pays for the one before it.
                provider.force_flush()
                plain_provider.force_flush()
        instrumentor.uninstrument()
        provider.shutdown()
    plain_provider.shutdown()

    for clock, which in (("wall", 0), ("thread CPU", 1)):
        median = {
            name: statistics.median(value[which] for value in values)
            for name, values in rounds.items()
        }
        bare = median["bare"]
        print(f"-- {clock} time, median of {args.rounds} rounds of {args.calls} calls")
        for name, value in median.items():
            print(f"{name:>12}: {value:8.2f} µs per call ({value - bare:+8.2f} µs over bare)")
        ratio = (median["tool step"] - bare) / (median["plain span"] - bare)
        print(
            "tool step overhead / plain span overhead: "
            f"{ratio:.2f}x (target ≤ {TARGET_TOOL_VS_SPAN}x)"
        )
        worst_value = max(median["now()"], median["uuid4()"])
        print(f"value step: {worst_value:.2f} µs (target ≤ {TARGET_VALUE_US} µs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
