"""One :class:`~otel_replay.replay.Run` object replayed many times (a test suite replays a
production run in test after test): every replay serves what was recorded, paced as that
replay's own timing says, whatever the replays before it asked for."""

from __future__ import annotations

import time

import httpx

import otel_replay
from otel_replay._canonical import sha256_tag
from otel_replay.replay import Run
from otel_replay.settings import Timing
from tests.replay._recorded import recorded_step

URL = "http://llm.test/v1/events"
REQUEST = b'{"stream": "please"}'
CHUNKS = (b"data: one\n\n", b"data: two\n\n", b"data: three\n\n")
LATE_NS = 1_000_000_000
"""When the last chunk arrived, after the request (ns)."""


def _run() -> Run:
    sizes = [len(c) for c in CHUNKS]
    step = recorded_step(
        index=0,
        kind="http",
        endpoint="POST /v1/events",
        method="POST",
        url=URL,
        request_body=REQUEST,
        request_hash=sha256_tag(REQUEST),
        status_code=200,
        response_headers=(("content-type", "text/event-stream"),),
        response_body=b"".join(CHUNKS),
        fidelity="exact",
        chunks=((sizes[0], 1_000_000), (sizes[1], 2_000_000), (sizes[2], LATE_NS)),
        duration_ns=LATE_NS,
    )
    return Run(run_id="r_reused", source="test", steps=(step,))


def _replay(run: Run, timing: Timing) -> tuple[list[bytes], float]:
    """The chunks one replay serves, and how long reading them took (s)."""
    with otel_replay.replaying(run, timing=timing) as result, httpx.Client() as client:
        started = time.perf_counter()
        with client.stream("POST", URL, content=REQUEST) as response:
            got = list(response.iter_raw())
        took = time.perf_counter() - started
    assert result.identical
    return got, took


def test_each_replay_of_one_run_object_keeps_its_own_timing() -> None:
    run = _run()
    fast, fast_s = _replay(run, "fast")
    paced, paced_s = _replay(run, "recorded")
    fast_again, fast_again_s = _replay(run, "fast")

    assert fast == paced == fast_again == list(CHUNKS)
    assert paced_s >= LATE_NS / 1e9
    assert fast_s < LATE_NS / 2e9 and fast_again_s < LATE_NS / 2e9  # not paced
