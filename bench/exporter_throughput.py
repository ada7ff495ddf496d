"""Exporter throughput: steps per second through the ``replay`` exporter, the CPU each step
costs, and what the hand-off costs the application thread per step.

The steps: Chat Completions calls with ~8 KB JSON requests (a system prompt and a sliding
window of the conversation, each request ending in a new user message) and ~4 KB JSON
responses, 20 turns per run. They are recorded for real: the instrumented httpx client posts
them through an in-process transport, the capture builds steps (``otel_replay.step.Step``)
and spans.

* throughput — the recorded steps are handed to a fresh exporter (real puts into the hand-off)
  as fast as the hand-off takes them; the clock stops when ``force_flush`` returns, i.e. when
  every step and span is durable in the store (fsync-ed). Zero loss is checked: the store holds
  every step, and nothing was dropped or failed. Repeated ``--repeat`` times on the same
  steps (a fresh store each time): median, and the spread (lowest to highest). Beside the
  wall-clock rate, the CPU per step: the writer thread's own (where the store's Python runs,
  under the GIL), and the whole process's (the writer, zstd's and fsync's threads, the puts).
* floor — in the same run, the least CPU any store of these bytes spends per step: sha256
  once and zstd (level 3, as a flush compresses) once over every byte the store keeps new
  (the objects of its packs, the JSON of its records), single-threaded.
* end to end — the same calls made live by the application with the exporter attached, until
  all of it is durable (the application and the writer share the GIL).
* app-thread cost — per call, instrumented with the exporter's consumer attached (steps
  built and handed off) minus instrumented with no consumer (nothing built), alternating call
  by call, median. For reference: the same with the real writer running concurrently (in
  interleaved blocks), and what the inline bodies cost the capture.

    python bench/exporter_throughput.py [--steps 10000] [--repeat 3] [--calls 3000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import zstandard
from opentelemetry.sdk.trace import TracerProvider

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from otel_replay.capture.instrumentor import ReplayInstrumentor
from otel_replay.export import ReplaySpanExporter
from otel_replay.runs._handoff import handoff
from otel_replay.runs._run import start_process_run
from otel_replay.store import Store
from otel_replay.store._pack import decompress_frame, entries, parse_table
from otel_replay.store._records import read_frames

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
                messages = [system, *window]
                body = {"model": "gpt-4o-mini", "messages": messages, "temperature": 0.2}
                request = json.dumps(body, separators=(",", ":")).encode()
                if len(request) <= REQUEST_BYTES or len(window) == 1:
                    break
                window.pop(0)
            pad = REQUEST_BYTES - len(request)
            if pad > 0:  # top up the system prompt so every request is ~8 KB
                messages[0] = {"role": "system", "content": system["content"] + " " * pad}
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


def record(pairs: list[tuple[bytes, bytes]]) -> list[object]:
    """The hand-off's items of the calls: (step, span, size) for each, and each run()'s end
    behind its steps."""
    provider = TracerProvider()
    instrumentor = ReplayInstrumentor()
    consumer = handoff().attach()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with _client([r for _, r in pairs]) as client:
            _call_all(client, [q for q, _ in pairs])
    finally:
        instrumentor.uninstrument()
    items = consumer.drain()
    handoff().detach(consumer)
    provider.shutdown()
    steps = sum(type(item) is tuple for item in items)
    assert steps == len(pairs), (steps, len(pairs))
    return items


@dataclass(frozen=True, slots=True)
class Throughput:
    """One throughput round: rate, CPU per step, what was stored and lost, and sizes."""

    rate: float
    writer_us: float
    """The writer thread's CPU per step."""
    process_us: float
    """The process's CPU per step (every thread)."""
    stored: int
    lost: int
    objects: int
    """Objects the store keeps (chunks and manifests)."""
    before: tuple[int, int, int]
    """Bytes of packs, records and index once durable."""
    after: tuple[int, int, int]
    """The same once the store is closed (its packs and records merged and recompressed)."""
    sha_us: float
    """sha256, once, over the bytes the store keeps new, per step."""
    zstd_us: float
    """zstd-3, once, over the same bytes, per step."""


def _writer_thread() -> threading.Thread:
    (writer,) = [t for t in threading.enumerate() if t.name == "otel-replay-writer"]
    return writer


def _sizes(root: Path) -> tuple[int, int, int]:
    """Bytes of the store's packs, records and index (with its WAL)."""
    return (
        sum(f.stat().st_size for f in (root / "objects").rglob("*.pack")),
        sum(f.stat().st_size for f in (root / "runs").rglob("*.rec")),
        sum(f.stat().st_size for f in root.glob("index.sqlite*")),
    )


def floor_us(root: Path, steps: int) -> tuple[float, float, int]:
    """The floor of the store at ``root`` (µs per step, single-threaded CPU): sha256 and
    zstd-3 of every byte it keeps new, once, each apart; and how many objects it keeps."""
    contents: list[bytes] = []
    objects = 0
    for pack in (root / "objects").rglob("*.pack"):
        data = pack.read_bytes()
        table = entries(parse_table(data, len(data)))
        objects += len(table)
        frames = sorted({(e.frame_offset, e.frame_size) for e in table})
        contents += [decompress_frame(data[at : at + size]) for at, size in frames]
    for rec in (root / "runs").rglob("*.rec"):
        contents += read_frames(rec.read_bytes()).records
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
    start = time.thread_time()
    for content in contents:
        hashlib.sha256(content).digest()
    hashed = time.thread_time()
    for content in contents:
        compressor.compress(content)
    done = time.thread_time()
    return (hashed - start) / steps * 1e6, (done - hashed) / steps * 1e6, objects


def throughput(items: list[object], steps: int, root: Path) -> Throughput:
    """Steps/s from the first put until everything is durable, into a fresh store."""
    store = Store.open(root)
    exporter = ReplaySpanExporter(store)
    clock = time.pthread_getcpuclockid(_writer_thread().ident or 0)
    writer_start, process_start = time.clock_gettime(clock), time.process_time()
    start = time.perf_counter()
    for item in items:
        if type(item) is tuple:
            handoff().put(item[0], item[1])
        else:
            handoff().post(item)
    assert exporter.force_flush(600_000)
    elapsed = time.perf_counter() - start
    writer_cpu = time.clock_gettime(clock) - writer_start
    process_cpu = time.process_time() - process_start
    stats = exporter.stats()
    exporter.shutdown()
    stored = sum(run.step_count for run in store.runs())
    sha, zstd, objects = floor_us(root, steps)
    before = _sizes(root)
    store.close()
    return Throughput(
        rate=steps / elapsed,
        writer_us=writer_cpu / steps * 1e6,
        process_us=process_cpu / steps * 1e6,
        stored=stored,
        lost=stats.dropped + stats.failed,
        objects=objects,
        before=before,
        after=_sizes(root),
        sha_us=sha,
        zstd_us=zstd,
    )


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


def _spread(values: list[float], fmt: str) -> str:
    """Median (lowest-highest)."""
    low, middle, high = (
        format(v, fmt) for v in (min(values), statistics.median(values), max(values))
    )
    return f"{middle} ({low}-{high})"


def main() -> None:
    # The clock stops when force_flush returns: let it wait as long as the writing takes
    # (the default bound, 10 s, is shorter than 10,000 steps on a busy machine).
    os.environ.setdefault("OTEL_REPLAY_FLUSH_TIMEOUT_MS", "600000")
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    pairs = conversation(args.steps)
    request_avg = statistics.mean(len(q) for q, _ in pairs)
    response_avg = statistics.mean(len(r) for _, r in pairs)
    with tempfile.TemporaryDirectory(prefix="otel-replay-bench-") as tmp:
        root = Path(tmp)
        items = record(pairs)
        rounds = [
            throughput(items, len(pairs), root / f"throughput-{n}") for n in range(args.repeat)
        ]
        del items
        e2e_rate, e2e_stored, e2e_lost = end_to_end(pairs, root)
        cost = app_cost(pairs, root, min(args.calls, len(pairs)), args.rounds)

    handoff_us = cost["hand-off"] - cost["none"]
    inline_us = cost["none"] - cost["no-inline"]
    rates = [r.rate for r in rounds]
    sha = statistics.median(r.sha_us for r in rounds)
    zstd = statistics.median(r.zstd_us for r in rounds)
    floor = sha + zstd
    writer = statistics.median(r.writer_us for r in rounds)
    stored = min(r.stored for r in rounds)
    lost = max(r.lost for r in rounds)
    print(
        f"{len(pairs)} steps, request {request_avg / 1024:.1f} KB, response "
        f"{response_avg / 1024:.1f} KB (average), {TURNS_PER_RUN} turns per run; "
        f"{rounds[0].objects / len(pairs):.1f} objects stored per step"
    )
    print(
        f"exporter throughput         {_spread(rates, '.0f')} steps/s, median (spread) of "
        f"{len(rounds)}  (target >= {TARGET_STEPS_PER_S:.0f}); stored {stored}/{len(pairs)}, "
        f"lost {lost}"
    )
    print(
        f"  CPU per step              writer thread {_spread([r.writer_us for r in rounds], '.0f')}"
        f" µs, process {_spread([r.process_us for r in rounds], '.0f')} µs"
    )
    print(
        f"  floor                     {floor:.0f} µs per step = {1e6 / floor:.0f} steps/s  "
        f"(sha256 {sha:.0f} + zstd-3 {zstd:.0f} µs, once over the bytes the store keeps new, "
        "one thread)"
    )
    print(f"  writer thread / floor     {writer / floor:8.1f}x")
    sizes = zip(("packs", "records", "index"), rounds[0].before, rounds[0].after, strict=True)
    print(
        "  store (durable -> closed) "
        + ", ".join(f"{name} {a / 1e6:.2f} -> {b / 1e6:.2f} MB" for name, a, b in sizes)
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
