"""Tool and value step overhead on the application thread.

Measured in one process, interleaved over several rounds, median round reported:

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
from otel_replay.capture._run import start_process_run
from otel_replay.capture.instrumentor import ReplayInstrumentor
from otel_replay.export import ReplaySpanExporter

TARGET_TOOL_VS_SPAN = 2.0
TARGET_VALUE_US = 20.0


class _Discard(SpanExporter):
    def export(self, spans):  # type: ignore[no-untyped-def]
        return SpanExportResult.SUCCESS


def lookup(order_id: str) -> dict[str, Any]:
    return {"order_id": order_id, "status": "shipped", "total": 129.0, "items": ["headphones"]}


def _per_call_us(fn: Callable[[], Any], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - started) / calls * 1e6


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
        rounds: dict[str, list[float]] = {name: [] for name in variants}
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

    median = {name: statistics.median(values) for name, values in rounds.items()}
    bare = median["bare"]
    span_added = median["plain span"] - bare
    tool_added = median["tool step"] - bare
    for name, value in median.items():
        print(f"{name:>12}: {value:8.2f} µs per call ({value - bare:+8.2f} µs over bare)")
    ratio = tool_added / span_added
    print(
        f"tool step overhead / plain span overhead: {ratio:.2f}x (target ≤ {TARGET_TOOL_VS_SPAN}x)"
    )
    worst_value = max(median["now()"], median["uuid4()"])
    print(f"value step: {worst_value:.2f} µs (target ≤ {TARGET_VALUE_US} µs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
