"""Replay speed: the cost of one replayed request for runs of 30, 300 and 3,000 recorded
interactions, beside a bare httpx MockTransport call, cassetter and vcrpy replaying the same
interactions, all in this process.

Each interaction is a distinct 8 KB Chat Completions request with a 4 KB JSON response; every
replayer must tell them apart by their bodies. ``otel_replay.replaying(run)`` serves them to
a plain ``httpx.Client()`` as an application gets them (the replay transport chosen for the
client, strict mode's socket guards, the recorded clock), matching by request hash (the common
case: the code did not change). cassetter (a Rust core) replays a TOML cassette (its faster
format to load, and the one that holds 3,000 such interactions: its YAML loader refuses more
than 250,000 nodes) with ``match_on=["method", "uri", "body"]``; vcrpy a JSON cassette with
the same matchers. vcrpy
slows with the cassette's size, so at 300 and 3,000 it replays a sample of requests spread
over the run; cassetter and otel-replay replay every request, in passes over the run (as
many as make ~600 requests a round), each pass from a fresh session (loading the cassette or
run is not timed) to one client made once, as the bare calls go through one client. Every
replayed response is checked to be the one recorded for its request. Every timed pass starts
from a collected heap.

The bare call and ``replaying()`` take turns within each round, so a change in the machine's
load between rounds touches both; their ratio is the median of the rounds' ratios (CPU time
of the thread), the figure that holds still on a shared machine. The other figures are
medians over rounds.

Targets: ``replaying()`` at most 1.2x the bare call and at least 2x faster than cassetter,
flat up to 3,000 interactions.

    python bench/replay_speed.py [--sizes 30,300,3000] [--rounds 21] [--peer-rounds 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import vcr

import otel_replay
from otel_replay._canonical import sha256_tag
from otel_replay.replay import RecordedStep, Run
from otel_replay.step import Step

TARGET_RATIO_BARE = 1.2
TARGET_SPEEDUP_CASSETTER = 2.0
TARGET_SPEEDUP_VCRPY_30 = 5.0
TARGET_SPEEDUP_VCRPY_300 = 20.0
URL = "http://llm.bench/v1/chat/completions"
HEADERS = {"content-type": "application/json"}

Interactions = list[tuple[bytes, bytes]]
Clocks = tuple[float, float]
"""(wall, CPU) µs per call."""


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


def _run(interactions: Interactions) -> Run:
    steps = tuple(
        RecordedStep(
            Step(
                run_id="r_bench",
                index=n,
                trace_id=0,
                span_id=0,
                kind="llm",
                method="POST",
                url=URL,
                request_headers=[],
                request_body=request,
                request_hash=sha256_tag(request),
                status_code=200,
                response_headers=list(HEADERS.items()),
                response_body=response,
                complete=True,
            ),
            endpoint="openai.chat_completions",
            fidelity="exact",
        )
        for n, (request, response) in enumerate(interactions)
    )
    return Run(run_id="r_bench", source="bench", steps=steps, start_ns=1_763_700_000 * 10**9)


class Clock:
    """Time spent in timed sections: wall, and CPU of this (the only) thread."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0
        self.calls = 0

    def per_call(self) -> Clocks:
        """(wall, CPU) µs per call."""
        return self.wall / self.calls * 1e6, self.cpu / self.calls * 1e6


OnePass = Callable[[Clock], None]


def _calls(client: httpx.Client, interactions: Interactions, clock: Clock) -> None:
    """Send every request once (timed, from a collected heap), then check that each got its
    recorded response."""
    post = client.post
    gc.collect()
    wall, cpu = time.perf_counter(), time.thread_time()
    answers = [post(URL, content=body, headers=HEADERS).read() for body, _ in interactions]
    clock.cpu += time.thread_time() - cpu
    clock.wall += time.perf_counter() - wall
    clock.calls += len(interactions)
    for answer, (_, expected) in zip(answers, interactions, strict=True):
        if answer != expected:
            raise SystemExit("a replayer answered a request with another request's response")


def _passes(size: int) -> int:
    """Passes over the run per round: at least ~600 calls a round for small runs."""
    return max(1, 600 // size)


def _timed(one_pass: OnePass, size: int, rounds: int) -> Clocks:
    """(wall, CPU) µs per call, the median of ``rounds`` rounds of passes over a run of
    ``size``, after one pass to warm up."""
    return _median(_taking_turns([one_pass], size, rounds)[0])


def _taking_turns(variants: list[OnePass], size: int, rounds: int) -> list[list[Clock]]:
    """Each variant's clock for each of ``rounds`` rounds, after one pass of each to warm up;
    in a round, each variant makes its passes over the run of ``size`` in turn."""
    for one_pass in variants:
        one_pass(Clock())
    clocks: list[list[Clock]] = [[] for _ in variants]
    for _ in range(rounds):
        for one_pass, kept in zip(variants, clocks, strict=True):
            clock = Clock()
            for _ in range(_passes(size)):
                one_pass(clock)
            kept.append(clock)
    return clocks


def _median(rounds: list[Clock]) -> Clocks:
    per_call = [clock.per_call() for clock in rounds]
    return statistics.median(w for w, _ in per_call), statistics.median(c for _, c in per_call)


@contextmanager
def bare(interactions: Interactions) -> Iterator[OnePass]:
    """A pass of MockTransport calls answering every request with its recorded response from
    a dict."""
    responses = dict(interactions)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=responses[request.content], headers=HEADERS)

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        yield lambda clock: _calls(client, interactions, clock)


@contextmanager
def replaying(interactions: Interactions) -> Iterator[OnePass]:
    """A pass of ``otel_replay.replaying(run)`` serving the whole run to ``httpx.Client()``,
    a fresh replay per pass."""
    run = _run(interactions)
    with httpx.Client() as client:  # an application's client, made before the replay starts

        def one_pass(clock: Clock) -> None:
            with otel_replay.replaying(run) as result:
                _calls(client, interactions, clock)
            if not result.identical:
                raise SystemExit(f"the replay diverged: {result.first_divergence}")

        yield one_pass


def against_bare(interactions: Interactions, rounds: int) -> tuple[Clocks, Clocks, float]:
    """(bare call, ``replaying()``) (wall, CPU) µs per call, medians over ``rounds`` rounds in
    which they take turns, and the median of the rounds' ratios of their CPU times."""
    with bare(interactions) as plain, replaying(interactions) as ours:
        bare_rounds, our_rounds = _taking_turns([plain, ours], len(interactions), rounds)
    ratio = statistics.median(
        o.per_call()[1] / b.per_call()[1] for b, o in zip(bare_rounds, our_rounds, strict=True)
    )
    return _median(bare_rounds), _median(our_rounds), ratio


def cassetter_us(interactions: Interactions, rounds: int) -> Clocks:
    """cassetter replaying a cassette of the same interactions, recorded by cassetter itself
    (through a MockTransport), matching on method, URI and body; a fresh session per pass."""
    import cassetter

    responses = dict(interactions)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=responses[request.content], headers=HEADERS)

    match_on = ["method", "uri", "body"]
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "cassette.toml"
        with (
            cassetter.use_cassette(path, record_mode="all", match_on=match_on),
            httpx.Client(transport=httpx.MockTransport(handler)) as client,
        ):
            for body, _ in interactions:
                client.post(URL, content=body, headers=HEADERS).read()

        client = httpx.Client()  # its transport's class is patched: made before is fine

        def one_pass(clock: Clock) -> None:
            with cassetter.use_cassette(path, record_mode="none", match_on=match_on):
                _calls(client, interactions, clock)

        with client:
            return _timed(one_pass, len(interactions), rounds)


def vcrpy_us(interactions: Interactions, sample: int) -> Clocks:
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
    sampled = interactions[::step][:sample]
    clock = Clock()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "cassette.json"
        path.write_text(json.dumps(cassette))
        recorder = vcr.VCR(
            serializer="json", record_mode="none", match_on=["method", "uri", "body"]
        )
        with recorder.use_cassette(str(path), allow_playback_repeats=True), httpx.Client() as c:
            _calls(c, sampled, clock)
    return clock.per_call()


def _line(label: str, value: Clocks | float, unit: str = "µs", digits: int = 1) -> str:
    if isinstance(value, tuple):
        return f"  {label:<52} {value[1]:>9.1f} {unit} CPU {value[0]:>9.1f} {unit} wall"
    return f"  {label:<52} {value:>9.{digits}f} {unit}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="30,300,3000")
    parser.add_argument("--rounds", type=int, default=21, help="of the bare call and replaying()")
    parser.add_argument("--peer-rounds", type=int, default=5, help="of cassetter")
    parser.add_argument("--vcr-sample", type=int, default=30)
    args = parser.parse_args()
    logging.getLogger("vcr").setLevel(logging.WARNING)
    print("per request; ratios by CPU time of the (only) thread: other work on the machine")
    print("inflates wall time, not the thread's CPU time. The bare call and replaying() take")
    print("turns in each round; their ratio is the median of the rounds' ratios")
    failures: list[str] = []
    ratios: list[float] = []
    for size in (int(s) for s in args.sizes.split(",")):
        interactions = _interactions(size)
        plain, ours, ratio = against_bare(interactions, args.rounds)
        theirs = cassetter_us(interactions, args.peer_rounds)
        ratios.append(ratio)
        print(f"run of {size:,} recorded interactions")
        print(_line("bare httpx MockTransport call", plain))
        print(_line("otel_replay.replaying() call", ours))
        print(_line("cassetter replayed call (TOML cassette)", theirs))
        print(_line(f"otel-replay / bare call (target <= {TARGET_RATIO_BARE})", ratio, "x", 2))
        if ratio > TARGET_RATIO_BARE:
            failures.append(f"{size}: {ratio:.2f}x the bare call")
        print(_line("cassetter / bare call", theirs[1] / plain[1], "x"))
        speedup = theirs[1] / ours[1]
        target = TARGET_SPEEDUP_CASSETTER
        print(_line(f"otel-replay speed-up over cassetter (target >= {target:g})", speedup, "x"))
        if speedup < target:
            failures.append(f"{size}: {speedup:.2f}x faster than cassetter")
        if size <= 300:
            slow = vcrpy_us(interactions, args.vcr_sample)
            speedup = slow[1] / ours[1]
            target = TARGET_SPEEDUP_VCRPY_30 if size <= 30 else TARGET_SPEEDUP_VCRPY_300
            print(_line("vcrpy replayed call (JSON cassette)", slow))
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
