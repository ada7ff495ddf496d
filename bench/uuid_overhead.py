"""What recording costs the uuids others draw: ``uuid.uuid4()`` called by an installed package
(a framework's run ids, an SDK's idempotency keys) while the instrumentor records, against the
same call with no instrumentor; and, for scale, the application's own draw, a value step.

The "installed package" is a module written to a temporary ``site-packages`` directory, so its
calls are judged as a framework's are. Interleaved rounds, median round reported, in the
calling thread's CPU time.

    python bench/uuid_overhead.py [--calls 20000] [--rounds 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import otel_replay
from otel_replay.capture.instrumentor import ReplayInstrumentor
from otel_replay.runs._run import start_process_run

_LIBRARY = """
import uuid

def draw(n):
    for _ in range(n):
        uuid.uuid4()
"""


class _Discard(SpanExporter):
    def export(self, spans):  # type: ignore[no-untyped-def]
        return SpanExportResult.SUCCESS


def _per_call_ns(fn: Callable[[int], None], calls: int) -> float:
    began = time.thread_time_ns()
    fn(calls)
    return (time.thread_time_ns() - began) / calls


def _app_draws(n: int) -> None:
    for _ in range(n):
        uuid.uuid4()


def _explicit_draws(n: int) -> None:
    for _ in range(n):
        otel_replay.uuid4()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    installed = Path(tempfile.mkdtemp()) / "site-packages"
    installed.mkdir()
    (installed / "bench_framework.py").write_text(_LIBRARY)
    sys.path.insert(0, str(installed))
    import bench_framework  # type: ignore[import-not-found]

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(_Discard()))
    instrumentor = ReplayInstrumentor()
    bare, held, app, explicit = [], [], [], []
    for _ in range(args.rounds):
        bare.append(_per_call_ns(bench_framework.draw, args.calls))
        start_process_run()
        instrumentor.instrument(tracer_provider=provider)
        held.append(_per_call_ns(bench_framework.draw, args.calls))
        app.append(_per_call_ns(_app_draws, max(1, args.calls // 20)))
        explicit.append(_per_call_ns(_explicit_draws, max(1, args.calls // 20)))
        instrumentor.uninstrument()
        provider.force_flush()
    provider.shutdown()
    base, lib, own, ours = (statistics.median(x) for x in (bare, held, app, explicit))
    print(f"a package's uuid4(), not recording:   {base / 1000:6.2f} µs")
    print(f"a package's uuid4(), while recording: {lib / 1000:6.2f} µs  ({lib / base:.2f}x)")
    print(f"the application's uuid4() (a step):   {own / 1000:6.2f} µs  ({own / base:.1f}x)")
    print(f"otel_replay.uuid4() (a step):         {ours / 1000:6.2f} µs  ({ours / base:.1f}x)")


if __name__ == "__main__":
    main()
