"""Replay speed: the cost of one replayed request for runs of 30, 300 and 3,000 recorded
interactions, beside a bare httpx MockTransport call and vcrpy replaying the same interactions
from a JSON cassette, all in this process.

Each interaction is a distinct 8 KB Chat Completions request with a 4 KB JSON response. The
replay transport matches by request hash (the common case: the code did not change); vcrpy
matches on method, URI and body, as it must to tell the requests apart. vcrpy slows with the
cassette's size, so at 300 and 3,000 it replays a sample of requests spread over the run.

    python bench/replay_speed.py [--sizes 30,300,3000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import vcr

from otel_replay._canonical import sha256_tag
from otel_replay.replay import RecordedStep, Run
from otel_replay.replay._session import ReplaySession
from otel_replay.replay._transport import transport_classes

TARGET_RATIO_BARE = 1.5
TARGET_SPEEDUP_30 = 5.0
TARGET_SPEEDUP_300 = 20.0
URL = "http://llm.bench/v1/chat/completions"
HEADERS = {"content-type": "application/json"}


def _interactions(count: int) -> list[tuple[bytes, bytes]]:
    turn = "Please check the status of my order and tell me when it will arrive. " * 3
    base: list[dict[str, str]] = [{"role": "system", "content": "You are a support agent."}]
    while len(json.dumps(base)) < 7900:
        base.append({"role": "user", "content": turn})
        base.append({"role": "assistant", "content": turn[::-1]})
    answer = "Your order shipped yesterday and should arrive on Friday. " * 62
    out = []
    for n in range(count):
        messages = [*base, {"role": "user", "content": f"Where is order A-{n}?"}]
        request = json.dumps({"model": "gpt-4o-mini", "messages": messages}).encode()
        response = json.dumps(
            {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "model": "gpt-4o-mini",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": answer[:3600]},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 2100, "completion_tokens": 900, "total_tokens": 3000},
            }
        ).encode()
        out.append((request, response))
    return out


def _run(interactions: list[tuple[bytes, bytes]]) -> Run:
    steps = tuple(
        RecordedStep(
            index=n,
            kind="llm",
            endpoint="openai.chat_completions",
            method="POST",
            url=URL,
            request_body=request,
            request_hash=sha256_tag(request),
            status_code=200,
            response_headers=tuple(HEADERS.items()),
            response_body=response,
            fidelity="exact",
        )
        for n, (request, response) in enumerate(interactions)
    )
    return Run(run_id="r_bench", source="bench", steps=steps)


def _per_call_us(client: httpx.Client, requests: list[bytes]) -> float:
    started = time.perf_counter()
    for body in requests:
        client.post(URL, content=body, headers=HEADERS).read()
    return (time.perf_counter() - started) / len(requests) * 1e6


def bare_us(interactions: list[tuple[bytes, bytes]], rounds: int) -> float:
    """A MockTransport answering every request with one fixed response."""
    response = interactions[0][1]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=response, headers=HEADERS)

    requests = [r for r, _ in interactions]
    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        return statistics.median(_per_call_us(client, requests) for _ in range(rounds))


def replay_us(interactions: list[tuple[bytes, bytes]], rounds: int) -> float:
    """Our replay transport serving the whole run once per round (a fresh session each)."""
    run = _run(interactions)
    requests = [r for r, _ in interactions]
    sync_cls, _ = transport_classes(httpx)
    times = []
    for _ in range(rounds):
        with httpx.Client(transport=sync_cls(ReplaySession(run))) as client:
            times.append(_per_call_us(client, requests))
    return statistics.median(times)


def vcrpy_us(interactions: list[tuple[bytes, bytes]], sample: int) -> float:
    """vcrpy replaying a JSON cassette of the same interactions (``sample`` requests)."""
    cassette = {
        "version": 1,
        "interactions": [
            {
                "request": {
                    "method": "POST",
                    "uri": URL,
                    "body": request.decode(),
                    "headers": {"content-type": ["application/json"]},
                },
                "response": {
                    "status": {"code": 200, "message": "OK"},
                    "headers": {"content-type": ["application/json"]},
                    "body": {"string": response.decode()},
                },
            }
            for request, response in interactions
        ],
    }
    step = max(1, len(interactions) // sample)
    requests = [r for r, _ in interactions][::step][:sample]
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "cassette.json"
        path.write_text(json.dumps(cassette))
        recorder = vcr.VCR(
            serializer="json", record_mode="none", match_on=["method", "uri", "body"]
        )
        with recorder.use_cassette(str(path), allow_playback_repeats=True), httpx.Client() as c:
            return _per_call_us(c, requests)


def _line(label: str, value: float, unit: str = "µs") -> str:
    return f"  {label:<44} {value:>10.1f} {unit}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="30,300,3000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--vcr-sample", type=int, default=30)
    args = parser.parse_args()
    logging.getLogger("vcr").setLevel(logging.WARNING)
    failures: list[str] = []
    ratios: list[float] = []
    for size in (int(s) for s in args.sizes.split(",")):
        interactions = _interactions(size)
        bare = bare_us(interactions, args.rounds)
        ours = replay_us(interactions, args.rounds)
        ratio = ours / bare
        ratios.append(ratio)
        print(f"run of {size:,} recorded interactions")
        print(_line("bare httpx MockTransport call", bare))
        print(_line("otel-replay replayed call", ours))
        print(_line("ratio to the bare call (target <= 1.5)", ratio, "x"))
        if ratio > TARGET_RATIO_BARE:
            failures.append(f"{size}: {ratio:.2f}x the bare call")
        if size <= 300:
            theirs = vcrpy_us(interactions, args.vcr_sample)
            speedup = theirs / ours
            target = TARGET_SPEEDUP_30 if size <= 30 else TARGET_SPEEDUP_300
            print(_line("vcrpy replayed call (JSON cassette)", theirs))
            print(_line(f"otel-replay speed-up over vcrpy (target >= {target:g})", speedup, "x"))
            if speedup < target:
                failures.append(f"{size}: {speedup:.1f}x faster than vcrpy")
    flat = max(ratios) / min(ratios)
    print(f"flatness: the slowest ratio is {flat:.2f}x the fastest (flat means close to 1)")
    for failure in failures:
        print(f"MISSED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
