"""Capture overhead: µs added per call over a bare httpx call, beside what
opentelemetry-instrumentation-httpx adds to the same call (for reference: the target against
the GenAI instrumentations, through the real openai SDK, is ``capture_peers.py``'s).

The call: an 8 KB Chat Completions request and a 4 KB JSON response through an in-process
transport, so the network does not drown the difference. Each variant runs in the same
process, interleaved over several rounds; the median round is reported. Also reports the
floor under any span-per-call capture (one span, two hashes, no parsing) measured the same way,
and the wall time of ``import otel_replay`` in a fresh interpreter.

    python bench/capture_overhead.py [--calls 3000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx
import wrapt
from opentelemetry import context, trace
from opentelemetry.instrumentation.utils import unwrap
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind

from otel_replay.capture.instrumentor import ReplayInstrumentor

TARGET_RATIO_BARE = 1.0
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


def _floor_wrapper(provider: TracerProvider) -> Callable[..., httpx.Response]:
    """The least a span-per-call capture does on the application thread: hash the request,
    open a CLIENT span with the attributes samplers need, make it current, then hash the
    response and add a dozen response attributes before ending the span. No parsing, no
    content, no hand-off: the floor under any synchronous design."""
    tracer = provider.get_tracer("bench-floor")

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> httpx.Response:
        request = args[0]
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "server.address": request.url.host,
            "replay.run.id": "bench",
            "replay.step.index": 0,
            "replay.request.hash": hashlib.sha256(request.content).hexdigest(),
        }
        span = tracer.start_span("chat gpt-4o-mini", kind=SpanKind.CLIENT, attributes=attrs)
        token = context.attach(trace.set_span_in_context(span))
        try:
            response: httpx.Response = wrapped(*args, **kwargs)
        finally:
            context.detach(token)
        done = {f"gen_ai.usage.detail_{i}": i for i in range(11)}
        done["replay.response.hash"] = hashlib.sha256(response.content).hexdigest()
        span.set_attributes(done)
        span.end()
        return response

    return wrapper


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
    floor = _floor_wrapper(provider)

    def run_floor(calls: int) -> float:
        wrapt.wrap_function_wrapper(httpx.Client, "_send_single_request", floor)
        try:
            return _time_calls(ours, request_body, calls)
        finally:
            unwrap(httpx.Client, "_send_single_request")

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
        "floor": run_floor,
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
    print(f"otel-replay / otel-httpx   {ours_added / otel_added:8.2f}x")
    floor_added = median["floor"] - median["bare"]
    print(
        f"one-span floor adds       {floor_added:8.1f} µs  "
        f"({floor_added / otel_added:.2f}x otel-httpx: no span-per-call capture goes lower)"
    )
    print(f"import otel_replay         {_import_ms():8.1f} ms  (target <= {TARGET_IMPORT_MS})")


if __name__ == "__main__":
    main()
