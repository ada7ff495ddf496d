"""Exporter throughput: steps per second through the ``replay`` exporter, and what the hand-off
costs the application thread per step.

The steps: Chat Completions calls with ~8 KB JSON requests (a system prompt and a sliding
window of the conversation, each request ending in a new user message) and ~4 KB JSON
responses, 20 turns per run. They are recorded for real: the instrumented httpx client posts
them through an in-process transport, the capture builds steps (``otel_replay.step.Step``)
and spans.

* throughput — the recorded steps are handed to a fresh exporter (real puts into the hand-off)
  as fast as the hand-off takes them; the clock stops when ``force_flush`` returns, i.e. when
  every step and span is durable in the store (fsync-ed). Zero loss is checked: the store holds
  every step, and nothing was dropped or failed.
* end to end — the same calls made live by the application with the exporter attached, until
  all of it is durable (the application and the writer share the GIL).
* app-thread cost — per call, instrumented with the exporter's consumer attached (steps
  built and handed off) minus instrumented with no consumer (nothing built), alternating call
  by call, median. For reference: the same with the real writer running concurrently (in
  interleaved blocks), and what the inline bodies cost the capture.

    python bench/exporter_throughput.py [--steps 10000] [--calls 3000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from opentelemetry.sdk.trace import TracerProvider

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from otel_replay.capture._handoff import handoff
from otel_replay.capture._run import start_process_run
from otel_replay.capture.instrumentor import ReplayInstrumentor
from otel_replay.export import ReplaySpanExporter
from otel_replay.store import Store

TARGET_STEPS_PER_S = 5000.0
TARGET_APP_US = 15.0
TURNS_PER_RUN = 20
REQUEST_BYTES = 8 * 1024
RESPONSE_BYTES = 4 * 1024

_VOCABULARY = (
    "order refund package tracking customer delivery address invoice please check status the a "
    "of to and is it when will arrive today tomorrow week thanks help support agent warehouse "
    "courier parcel label return exchange warranty damaged missing replacement payment card "
    "account email confirm number reference schedule weekend evening morning driver signature"
)
_WORDS = _VOCABULARY.split()


def _text(rng: random.Random, size: int) -> str:
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


def conversation(steps: int, seed: int = 7) -> list[tuple[bytes, bytes]]:
    """(request, response) bodies: runs of :data:`TURNS_PER_RUN` turns whose requests re-send a
    window of the history, trimmed to about 8 KB."""
    rng = random.Random(seed)
    out: list[tuple[bytes, bytes]] = []
    while len(out) < steps:
        system = {"role": "system", "content": _text(rng, 1500)}
        history: list[dict[str, str]] = []
        for turn in range(TURNS_PER_RUN):
            history.append({"role": "user", "content": _text(rng, rng.randint(300, 900))})
            window = list(history)
            while True:
                body = {"model": "gpt-4o-mini", "messages": [system, *window], "temperature": 0.2}
                request = json.dumps(body, separators=(",", ":")).encode()
                if len(request) <= REQUEST_BYTES or len(window) == 1:
                    break
                window.pop(0)
            pad = REQUEST_BYTES - len(request)
            if pad > 0:  # top up the system prompt so every request is ~8 KB
                body["messages"][0] = {"role": "system", "content": system["content"] + " " * pad}
                request = json.dumps(body, separators=(",", ":")).encode()
            answer = _text(rng, RESPONSE_BYTES - 420)
            response = json.dumps(
                {
                    "id": f"chatcmpl-{rng.getrandbits(48):x}",
                    "object": "chat.completion",
                    "created": 1763700000 + turn,
                    "model": "gpt-4o-mini-2024-07-18",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": answer},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 2100, "completion_tokens": 900},
                }
            ).encode()
            history.append({"role": "assistant", "content": answer})
            out.append((request, response))
            if len(out) == steps:
                break
    return out


class _Responder:
    """An in-process transport answering the prepared responses in order."""

    def __init__(self, responses: list[bytes]) -> None:
        self.responses = responses
        self.next = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = self.responses[self.next % len(self.responses)]
        self.next += 1
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})


HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench-not-a-secret"}


def _client(responses: list[bytes]) -> httpx.Client:
    return httpx.Client(
        transport=httpx.MockTransport(_Responder(responses)), base_url="http://bench.local/v1"
    )


def _call_all(client: httpx.Client, requests: list[bytes], runs: bool = True) -> None:
    import otel_replay

    for start in range(0, len(requests), TURNS_PER_RUN):
        with otel_replay.run("bench-agent") if runs else _nothing():
            for body in requests[start : start + TURNS_PER_RUN]:
                client.post("/chat/completions", content=body, headers=HEADERS).json()


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def throughput(pairs: list[tuple[bytes, bytes]], root: Path) -> tuple[float, int, int]:
    """Steps/s from the first put until everything is durable; (rate, steps stored, lost)."""
    provider = TracerProvider()
    instrumentor = ReplayInstrumentor()
    consumer = handoff().attach()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with _client([r for _, r in pairs]) as client:
            _call_all(client, [q for q, _ in pairs])
    finally:
        instrumentor.uninstrument()
    items = consumer.drain()  # steps, and each run()'s end behind its steps
    handoff().detach(consumer)
    steps = sum(type(item) is tuple for item in items)
    assert steps == len(pairs), (steps, len(pairs))

    store = Store.open(root / "throughput")
    exporter = ReplaySpanExporter(store)
    start = time.perf_counter()
    for item in items:
        if type(item) is tuple:
            handoff().put(item[0], item[1])
        else:
            handoff().post(item)
    assert exporter.force_flush(600_000)
    elapsed = time.perf_counter() - start
    stats = exporter.stats()
    exporter.shutdown()
    stored = sum(run.step_count for run in store.runs())
    store.close()
    provider.shutdown()
    return steps / elapsed, stored, stats.dropped + stats.failed


def end_to_end(pairs: list[tuple[bytes, bytes]], root: Path) -> tuple[float, int, int]:
    """Live calls with the exporter attached, until durable: (steps/s, stored, lost)."""
    provider = TracerProvider()
    store = Store.open(root / "e2e")
    exporter = ReplaySpanExporter(store)
    instrumentor = ReplayInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    start_process_run()
    try:
        with _client([r for _, r in pairs]) as client:
            start = time.perf_counter()
            _call_all(client, [q for q, _ in pairs])
            assert exporter.force_flush(600_000)
            elapsed = time.perf_counter() - start
    finally:
        instrumentor.uninstrument()
    stats = exporter.stats()
    exporter.shutdown()
    stored = sum(run.step_count for run in store.runs())
    store.close()
    provider.shutdown()
    return len(pairs) / elapsed, stored, stats.dropped + stats.failed


def app_cost(
    pairs: list[tuple[bytes, bytes]], root: Path, calls: int, rounds: int
) -> dict[str, float]:
    """Median µs per instrumented call in each variant.

    Per call, alternately: no consumer attached (the baseline: no step is built), the
    hand-off's consumer attached (step built and handed off; drained between calls, off
    the clock), and inline bodies off (to price them). Alternating call by call cancels the
    drift of a shared machine. Then, in interleaved blocks, calls with a live exporter writing
    concurrently (the GIL is shared with its writer).
    """
    requests = [q for q, _ in pairs[:calls]]
    client = _client([r for _, r in pairs[:calls]])

    def call(body: bytes) -> int:
        start = time.perf_counter_ns()
        client.post("/chat/completions", content=body, headers=HEADERS).json()
        return time.perf_counter_ns() - start

    bare = statistics.median(call(body) for body in requests) / 1000
    provider = TracerProvider()
    instrumentor = ReplayInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    recorder = instrumentor.recorder
    assert recorder is not None
    inline = recorder.inline_limit

    samples: dict[str, list[int]] = {"none": [], "hand-off": [], "no-inline": []}
    try:
        for body in requests[:50]:
            call(body)
        for _ in range(rounds):
            for body in requests:
                samples["none"].append(call(body))
                consumer = handoff().attach()
                samples["hand-off"].append(call(body))
                consumer.steps()
                handoff().detach(consumer)
                recorder.inline_limit = 0
                samples["no-inline"].append(call(body))
                recorder.inline_limit = inline
        blocks: dict[str, list[float]] = {"alone": [], "exporter": []}
        for _ in range(rounds):
            blocks["alone"].append(statistics.median(call(b) for b in requests))
            exporter = ReplaySpanExporter(root / "app-cost")
            blocks["exporter"].append(statistics.median(call(b) for b in requests))
            exporter.shutdown()
    finally:
        instrumentor.uninstrument()
        client.close()
        provider.shutdown()
    out = {name: statistics.median(values) / 1000 for name, values in samples.items()}
    out |= {name: statistics.median(values) / 1000 for name, values in blocks.items()}
    out["bare"] = bare
    return out


def main() -> None:
    # The clock stops when force_flush returns: let it wait as long as the writing takes
    # (the default bound, 10 s, is shorter than 10,000 steps on a busy machine).
    os.environ.setdefault("OTEL_REPLAY_FLUSH_TIMEOUT_MS", "600000")
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    pairs = conversation(args.steps)
    request_avg = statistics.mean(len(q) for q, _ in pairs)
    response_avg = statistics.mean(len(r) for _, r in pairs)
    with tempfile.TemporaryDirectory(prefix="otel-replay-bench-") as tmp:
        root = Path(tmp)
        rate, stored, lost = throughput(pairs, root)
        e2e_rate, e2e_stored, e2e_lost = end_to_end(pairs, root)
        cost = app_cost(pairs, root, min(args.calls, len(pairs)), args.rounds)

    handoff_us = cost["hand-off"] - cost["none"]
    inline_us = cost["none"] - cost["no-inline"]
    print(
        f"{len(pairs)} steps, request {request_avg / 1024:.1f} KB, response "
        f"{response_avg / 1024:.1f} KB (average), {TURNS_PER_RUN} turns per run"
    )
    print(
        f"exporter throughput         {rate:8.0f} steps/s  (target >= {TARGET_STEPS_PER_S:.0f}); "
        f"stored {stored}/{len(pairs)}, lost {lost}"
    )
    print(
        f"end to end (app + exporter) {e2e_rate:8.0f} steps/s  "
        f"stored {e2e_stored}/{len(pairs)}, lost {e2e_lost}"
    )
    print(f"bare httpx call             {cost['bare']:8.1f} µs  (how fast this machine is)")
    print(f"instrumented call           {cost['none']:8.1f} µs  (no consumer attached)")
    print(f"hand-off on the app thread  {handoff_us:8.1f} µs  (target <= {TARGET_APP_US:.0f})")
    print(
        f"  with the writer running   {cost['exporter'] - cost['alone']:8.1f} µs  "
        "(hand-off + the GIL shared with the writer, for reference)"
    )
    print(f"inline bodies (capture)     {inline_us:8.1f} µs  (paid by every recording process)")
    zero_loss = stored == len(pairs) and lost == 0 and e2e_stored == len(pairs) and e2e_lost == 0
    print(f"zero loss                   {'yes' if zero_loss else 'NO'}")


if __name__ == "__main__":
    main()
