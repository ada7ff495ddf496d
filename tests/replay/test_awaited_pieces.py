"""A response that kept coming while the program went on waits, on replay, for the requests
the recording made before each piece came; a replay that stops asking does not wait out the
recorded time.

Runs built in memory (what a store or a trace file gives replay), served to a real httpx
client through ``replaying()``.
"""

from __future__ import annotations

import asyncio
import threading
import time

import httpx

import otel_replay
from otel_replay._canonical import sha256_tag
from otel_replay.replay import RecordedStep, Run
from tests.replay._recorded import recorded_step

START = 1_763_700_000 * 10**9
SECOND = 10**9


def _get(index: int, path: str, body: bytes, start_s: float, chunks: tuple = ()) -> RecordedStep:
    return recorded_step(
        index=index,
        kind="http",
        endpoint=f"GET {path}",
        method="GET",
        url=f"http://events.test{path}",
        request_body=b"",
        request_hash=sha256_tag(b""),
        status_code=200,
        response_headers=(("content-type", "text/event-stream"),),
        response_body=body,
        fidelity="exact",
        chunks=chunks,
        start_ns=START + int(start_s * SECOND),
        duration_ns=chunks[-1][1] if chunks else SECOND // 100,
    )


# An event stream opened at 0 s; its second event came at 30 s, after the program had asked
# for /ping at 10 s.
RUN = Run(
    run_id="r_events",
    source="test",
    steps=(
        _get(0, "/events", b"data: 1\n\ndata: 2\n\n", 0, ((9, SECOND), (9, 30 * SECOND))),
        _get(1, "/ping", b"pong", 10),
    ),
    start_ns=START,
)


def _stream_beside_a_ping(run: Run, work_s: float) -> list[str]:
    """Replay ``run``: read the event stream while another thread pings once the first event
    came and ``work_s`` of real work went by (the replay skips sleeps: an event and a real
    wait, not a sleep, order the ping); what the program saw, in order. Asserts the replay
    was identical."""
    seen: list[str] = []
    first_piece = threading.Event()
    with otel_replay.replaying(run) as result, httpx.Client() as client:

        def ping() -> None:
            first_piece.wait(10)
            _work(work_s)
            seen.append("ping")
            client.get("http://events.test/ping").read()

        pinger = threading.Thread(target=ping)
        pinger.start()
        with client.stream("GET", "http://events.test/events") as stream:
            for piece in stream.iter_raw():
                seen.append(piece.decode())
                first_piece.set()
        pinger.join()
    assert result.identical, result.first_divergence
    return seen


def test_a_piece_waits_for_the_request_it_came_after() -> None:
    assert _stream_beside_a_ping(RUN, 0) == ["data: 1\n\n", "ping", "data: 2\n\n"]


def test_a_replay_that_stops_asking_gets_the_rest_without_waiting_out_the_recording() -> None:
    started = time.monotonic()
    with (
        otel_replay.replaying(RUN) as result,
        httpx.Client() as client,
        client.stream("GET", "http://events.test/events") as stream,
    ):
        pieces = [piece.decode() for piece in stream.iter_raw()]
    waited = time.monotonic() - started
    assert pieces == ["data: 1\n\n", "data: 2\n\n"]
    assert waited < 10, f"waited {waited:.1f} s for a request that never came (recorded: 30 s)"
    assert not result.identical  # /ping was never asked for


def _work(seconds: float) -> None:
    """Take ``seconds`` of real time, as slow code does (a wait the replay does not skip)."""
    threading.Event().wait(seconds)


# The same stream recorded on a quick machine: the ping at 0.1 s, the second event at 0.2 s.
QUICK = Run(
    run_id="r_events_quick",
    source="test",
    steps=(
        _get(0, "/events", b"data: 1\n\ndata: 2\n\n", 0, ((9, SECOND // 20), (9, SECOND // 5))),
        _get(1, "/ping", b"pong", 0.1),
    ),
    start_ns=START,
)


def test_a_replay_slower_than_the_recording_still_gets_each_piece_after_its_request() -> None:
    # A busy machine (or today's slower code) makes the ping a second after the first event,
    # five times the recorded lifetime of the whole stream: the second event still waits.
    assert _stream_beside_a_ping(QUICK, 1) == ["data: 1\n\n", "ping", "data: 2\n\n"]


def test_an_async_replay_slower_than_the_recording_keeps_the_order_too() -> None:
    seen: list[str] = []

    async def main() -> None:
        first_piece = asyncio.Event()
        async with httpx.AsyncClient() as client:

            async def ping() -> None:
                await first_piece.wait()
                await asyncio.to_thread(_work, 1)
                seen.append("ping")
                await (await client.get("http://events.test/ping")).aread()

            pinger = asyncio.create_task(ping())
            async with client.stream("GET", "http://events.test/events") as stream:
                async for piece in stream.aiter_raw():
                    seen.append(piece.decode())
                    first_piece.set()
            await pinger

    with otel_replay.replaying(QUICK) as result:
        asyncio.run(main())
    assert seen == ["data: 1\n\n", "ping", "data: 2\n\n"]
    assert result.identical, result.first_divergence
