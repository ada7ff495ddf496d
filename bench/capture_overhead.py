"""Capture overhead: µs added per call over a bare httpx call, beside what
opentelemetry-instrumentation-httpx adds to the same call.

The call: an 8 KB Chat Completions request and a 4 KB JSON response through an in-process
transport, so the network does not drown the difference. Each variant runs in the same
process, interleaved over several rounds; the median round is reported. Also reports the
wall time of ``import otel_replay`` in a fresh interpreter.

    python bench/capture_overhead.py [--calls 3000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import httpx
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from otel_replay.capture.instrumentor import ReplayInstrumentor

TARGET_RATIO_BARE = 1.0
TARGET_RATIO_OTEL = 0.5
TARGET_IMPORT_MS = 150.0


class _Discard(SpanExporter):
    def export(self, spans):  # type: ignore[no-untyped-def]
        return SpanExportResult.SUCCESS


def _bodies() -> tuple[bytes, bytes]:
    turn = "Please check the status of my order and tell me when it will arrive. " * 3
    messages = [{"role": "system", "content": "You are a helpful support agent."}]
    while len(json.dumps(messages)) < 8000:
        messages.append({"role": "user", "content": turn})
        messages.append({"role": "assistant", "content": turn[::-1]})
    request = json.dumps({"model": "gpt-4o-mini", "messages": messages, "temperature": 0.7})
    answer = "Your order A-1234 shipped yesterday and should arrive on Friday. " * 60
    response = json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1763700000,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer[:3700]},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 2100, "completion_tokens": 900, "total_tokens": 3000},
        }
    )
    return request.encode(), response.encode()


def _client(response_body: bytes) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=response_body, headers={"content-type": "application/json"}
        )

    return httpx.Client(transport=httpx.MockTransport(handler), base_url="http://bench.local/v1")


def _time_calls(client: httpx.Client, body: bytes, calls: int) -> float:
    headers = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
    for _ in range(50):
        client.post("/chat/completions", content=body, headers=headers)
    start = time.perf_counter_ns()
    for _ in range(calls):
        client.post("/chat/completions", content=body, headers=headers).json()
    return (time.perf_counter_ns() - start) / calls / 1000


def _import_ms() -> float:
    code = "import time; t=time.perf_counter(); import otel_replay; print(time.perf_counter()-t)"
    samples = [
        float(subprocess.check_output([sys.executable, "-c", code], text=True)) * 1000
        for _ in range(5)
    ]
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    request_body, response_body = _bodies()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(_Discard(), max_queue_size=100_000))

    bare = _client(response_body)
    otel = _client(response_body)
    HTTPXClientInstrumentor.instrument_client(otel, tracer_provider=provider)
    ours = _client(response_body)
    instrumentor = ReplayInstrumentor()

    def run_ours(calls: int) -> float:
        instrumentor.instrument(tracer_provider=provider)
        try:
            return _time_calls(ours, request_body, calls)
        finally:
            instrumentor.uninstrument()

    variants: dict[str, Callable[[int], float]] = {
        "bare": lambda n: _time_calls(bare, request_body, n),
        "otel-httpx": lambda n: _time_calls(otel, request_body, n),
        "otel-replay": run_ours,
    }
    results: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, variant in variants.items():
            results[name].append(variant(args.calls))
    provider.shutdown()

    median = {name: statistics.median(values) for name, values in results.items()}
    ours_added = median["otel-replay"] - median["bare"]
    otel_added = median["otel-httpx"] - median["bare"]
    print(
        f"request {len(request_body)} B, response {len(response_body)} B, "
        f"{args.calls} calls x {args.rounds} rounds (median round)"
    )
    print(f"bare httpx call            {median['bare']:8.1f} µs")
    print(f"otel-httpx adds            {otel_added:8.1f} µs")
    print(f"otel-replay adds           {ours_added:8.1f} µs")
    print(
        f"otel-replay / bare call    {ours_added / median['bare']:8.2f}x  "
        f"(target <= {TARGET_RATIO_BARE})"
    )
    print(
        f"otel-replay / otel-httpx   {ours_added / otel_added:8.2f}x  "
        f"(target <= {TARGET_RATIO_OTEL})"
    )
    print(f"import otel_replay         {_import_ms():8.1f} ms  (target <= {TARGET_IMPORT_MS})")


if __name__ == "__main__":
    main()
