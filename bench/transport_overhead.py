"""Recording overhead per call for requests (through urllib3's seam) and aiohttp, against the
same bare call in the same run.

The call: an 8 KB Chat Completions request answered with a 4 KB JSON response by a local
keep-alive server (loopback, so a call is a real urllib3/aiohttp exchange, not a mock). Bare
and recorded rounds are interleaved; the median round is reported, per call, with the ratio
and the µs added. Recording goes to a tracer provider with a discarding exporter, so the
figure is what the application thread pays (hash, parse, span, tee), not the exporter's I/O.

    python bench/transport_overhead.py [--calls 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import aiohttp
import requests
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from otel_replay.capture.instrumentor import ReplayInstrumentor


class _Discard(SpanExporter):
    def export(self, spans):  # type: ignore[no-untyped-def]
        return SpanExportResult.SUCCESS


def _bodies() -> tuple[bytes, bytes]:
    turn = "Please check the status of my order and tell me when it will arrive. " * 3
    messages = [{"role": "system", "content": "You are a helpful support agent."}]
    while len(json.dumps(messages)) < 8000:
        messages.append({"role": "user", "content": turn})
        messages.append({"role": "assistant", "content": turn[::-1]})
    request = json.dumps({"model": "gpt-4o-mini", "messages": messages}).encode()
    answer = "Your order A-1234 shipped yesterday and should arrive on Friday. " * 60
    response = json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer[:4000]},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 2000, "completion_tokens": 900, "total_tokens": 2900},
        }
    ).encode()
    return request, response


REQUEST, RESPONSE = _bodies()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Head and body leave as two writes: without this, delayed ACKs cost 40 ms a call.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(RESPONSE)))
        self.end_headers()
        self.wfile.write(RESPONSE)

    def log_message(self, *args: Any) -> None:
        pass


def _requests_round(url: str, calls: int) -> float:
    with requests.Session() as session:
        started = time.perf_counter()
        for _ in range(calls):
            got = session.post(url, data=REQUEST, headers={"content-type": "application/json"})
            assert len(got.content) == len(RESPONSE)
        return (time.perf_counter() - started) / calls


def _aiohttp_round(url: str, calls: int) -> float:
    async def go() -> float:
        async with aiohttp.ClientSession() as session:
            started = time.perf_counter()
            for _ in range(calls):
                async with session.post(
                    url, data=REQUEST, headers={"content-type": "application/json"}
                ) as got:
                    await got.read()
            return (time.perf_counter() - started) / calls

    return asyncio.run(go())


def _measure(one_round: Callable[[str, int], float], url: str, calls: int, rounds: int) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_Discard()))
    instrumentor = ReplayInstrumentor()
    bare: list[float] = []
    recorded: list[float] = []
    one_round(url, calls // 10)  # warm up: connections, imports
    for _ in range(rounds):
        bare.append(one_round(url, calls))
        instrumentor.instrument(tracer_provider=provider)
        try:
            recorded.append(one_round(url, calls))
        finally:
            instrumentor.uninstrument()
    b, r = statistics.median(bare) * 1e6, statistics.median(recorded) * 1e6
    name = one_round.__name__.strip("_").removesuffix("_round")
    print(
        f"{name:9} bare {b:7.1f} µs/call  recorded {r:7.1f} µs/call"
        f"  ratio {r / b:4.2f}  +{r - b:5.1f} µs"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    try:
        print(
            "8 KB chat request, 4 KB JSON response, loopback;"
            f" {options.calls} calls x {options.rounds} rounds"
        )
        _measure(_requests_round, url, options.calls, options.rounds)
        _measure(_aiohttp_round, url, options.calls, options.rounds)
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
