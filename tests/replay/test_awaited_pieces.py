"""A response that kept coming while the program went on waits, on replay, for the requests
the recording made before each piece came; a replay that stops asking does not wait out the
recorded time. An event stream the program cancelled stays open until it cancels again, and
its events answering requests a served tool never made are left out.

Runs built in memory (what a store or a trace file gives replay), served to a real httpx
client through ``replaying()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import aiohttp
import httpx
import pytest

import otel_replay
from otel_replay._canonical import sha256_tag
from otel_replay.replay import RecordedStep, Run
from otel_replay.replay._match import IDLE_S
from otel_replay.replay._unsent import UnsentAnswers, without_unsent
from tests.replay._recorded import recorded_step

START = 1_763_700_000 * 10**9
SECOND = 10**9


def _get(
    index: int, path: str, body: bytes, start_s: float, chunks: tuple = (), **facts: object
) -> RecordedStep:
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
        **facts,
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


def _stream_beside_a_ping(
    run: Run, work_s: float, work: Callable[[float], object] | None = None
) -> list[str]:
    """Replay ``run``: read the event stream while another thread pings once the first event
    came and ``work_s`` of real work went by (the replay skips sleeps: an event and a real
    wait, not a sleep, order the ping; ``work``, when given, does it instead); what the
    program saw, in order. Asserts the replay was identical."""
    seen: list[str] = []
    first_piece = threading.Event()
    with otel_replay.replaying(run) as result, httpx.Client() as client:

        def ping() -> None:
            first_piece.wait(10)
            (work or _work)(work_s)
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


def _starved_work(cpu: int, seconds: float) -> float:
    """Work for ``seconds`` of real time in this thread while other work holds its CPU, as on
    a loaded machine: the thread is pinned, at the idle priority, to ``cpu``, which a busy
    process holds. Returns the CPU time it got."""
    os.sched_setaffinity(0, {cpu})  # 0: this thread only, as for the policy below (Linux)
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    got, until = time.thread_time(), time.monotonic() + seconds
    while time.monotonic() < until:
        pass
    return time.thread_time() - got


@contextlib.contextmanager
def _busy_cpu() -> Iterator[int]:
    """A CPU that a busy process holds while the block runs."""
    cpu = max(os.sched_getaffinity(0))
    hog = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nprint(flush=True)\nwhile True: pass"
    with subprocess.Popen([sys.executable, "-c", hog], stdout=subprocess.PIPE) as busy:
        try:
            assert busy.stdout is not None
            busy.stdout.readline()  # it holds the CPU now
            yield cpu
        finally:
            busy.kill()


STARVED_S = IDLE_S + 1.5
"""Longer than the replay waits for a program that stopped asking."""


@pytest.mark.subprocess  # the busy process
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread affinity and policy")
def test_a_starved_program_still_gets_each_piece_after_its_request() -> None:
    # The ping's thread works longer than the replay waits for a program that stopped asking,
    # but barely gets a CPU meanwhile: it was slow, not done, and the second event still waits
    # for the ping (served first, an MCP session drops its answer, then waits for it).
    got: list[float] = []
    with _busy_cpu() as cpu:
        seen = _stream_beside_a_ping(
            QUICK, STARVED_S, lambda seconds: got.append(_starved_work(cpu, seconds))
        )
    assert got[0] < IDLE_S / 2, f"not starved: the work got {got[0]:.1f} s of CPU"
    assert seen == ["data: 1\n\n", "ping", "data: 2\n\n"]


@pytest.mark.subprocess  # the busy process
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread affinity and policy")
def test_a_starved_async_program_keeps_the_order_too() -> None:
    seen: list[str] = []
    got: list[float] = []

    async def main(cpu: int) -> None:
        first_piece = asyncio.Event()
        async with httpx.AsyncClient() as client:

            async def ping() -> None:
                await first_piece.wait()
                got.append(await asyncio.to_thread(_starved_work, cpu, STARVED_S))
                seen.append("ping")
                await (await client.get("http://events.test/ping")).aread()

            pinger = asyncio.create_task(ping())
            async with client.stream("GET", "http://events.test/events") as stream:
                async for piece in stream.aiter_raw():
                    seen.append(piece.decode())
                    first_piece.set()
            await pinger

    with otel_replay.replaying(QUICK) as result, _busy_cpu() as cpu:
        asyncio.run(main(cpu))
    assert got[0] < IDLE_S / 2, f"not starved: the work got {got[0]:.1f} s of CPU"
    assert seen == ["data: 1\n\n", "ping", "data: 2\n\n"]
    assert result.identical, result.first_divergence


async def _read_beside_a_ping(client: str, seen: list[str]) -> None:
    """Read the event stream with ``client`` while a task pings once the first event came and
    a second of real work went by, in a thread (as the async program's own work would)."""
    first_piece = asyncio.Event()

    async def ping(get: Callable[[str], Any]) -> None:
        await first_piece.wait()
        await asyncio.to_thread(_work, 1)
        seen.append("ping")
        await get("http://events.test/ping")

    if client == "httpx":
        async with httpx.AsyncClient() as http:

            async def get(url: str) -> None:
                await (await http.get(url)).aread()

            pinger = asyncio.create_task(ping(get))
            async with http.stream("GET", "http://events.test/events") as stream:
                async for piece in stream.aiter_raw():
                    seen.append(piece.decode())
                    first_piece.set()
            await pinger
        return
    async with aiohttp.ClientSession() as session:

        async def fetch(url: str) -> None:
            async with session.get(url) as response:
                await response.read()

        pinger = asyncio.create_task(ping(fetch))
        async with session.get("http://events.test/events") as response:
            async for piece in response.content.iter_any():
                seen.append(piece.decode())
                first_piece.set()
        await pinger


@pytest.mark.parametrize("client", ["httpx", "aiohttp"])  # aiohttp served every piece at once
def test_an_async_replay_slower_than_the_recording_keeps_the_order_too(client: str) -> None:
    seen: list[str] = []
    with otel_replay.replaying(QUICK) as result:
        asyncio.run(_read_beside_a_ping(client, seen))
    assert seen == ["data: 1\n\n", "ping", "data: 2\n\n"]
    assert result.identical, result.first_divergence


# An event stream the program cancelled as it closed its session (an MCP client over SSE):
# the server never ended it.
CANCELLED = Run(
    run_id="r_events_cancelled",
    source="test",
    steps=(
        _get(
            0,
            "/events",
            b"data: 1\n\ndata: 2\n\n",
            0,
            ((9, 1000), (9, 2000)),
            complete=False,
            error_type="asyncio.exceptions.CancelledError",
        ),
    ),
    start_ns=START,
)


async def _read_until_cancelled(client: str, seen: list[str]) -> None:
    if client == "httpx":
        async with (
            httpx.AsyncClient() as http,
            http.stream("GET", "http://events.test/events") as stream,
        ):
            async for piece in stream.aiter_raw():
                seen.append(piece.decode())
    else:
        async with (
            aiohttp.ClientSession() as session,
            session.get("http://events.test/events") as response,
        ):
            async for piece in response.content.iter_any():
                seen.append(piece.decode())


@pytest.mark.parametrize("client", ["httpx", "aiohttp"])
def test_a_stream_the_program_cancelled_stays_open_until_it_cancels_again(client: str) -> None:
    # Replayed as a transport error once its pieces ran out, it failed the reader while the
    # program was closing the session: an MCP client raised out of its task group.
    seen: list[str] = []

    async def main() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(_read_until_cancelled(client, seen), 0.5)

    with otel_replay.replaying(CANCELLED) as result:
        asyncio.run(main())
    assert "".join(seen) == "data: 1\n\ndata: 2\n\n"
    assert result.identical, result.first_divergence


def _rpc(message: dict[str, object]) -> bytes:
    return b"event: message\r\ndata: " + json.dumps(message).encode() + b"\r\n\r\n"


ANSWER_7 = _rpc({"jsonrpc": "2.0", "id": 7, "result": {"content": []}})
PROGRESS_7 = _rpc(
    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 7}}
)
ANSWER_8 = _rpc({"jsonrpc": "2.0", "id": 8, "result": {"tools": []}})


def _session_run() -> tuple[Run, list[bytes]]:
    """An MCP session over SSE: the stream (step 0), a tool step (1) whose body POSTed
    tools/call id 7 (step 2) between 10 and 20 ms, then a tools/list id 8 of the program's own
    (step 3) at 30 ms. The stream's pieces: progress and answer for 7, then the answer to 8."""
    ms = 10**6
    pieces = [PROGRESS_7 + ANSWER_7, ANSWER_8]
    stream = _get(
        0, "/sse", b"".join(pieces), 0, ((len(pieces[0]), 15 * ms), (len(pieces[1]), 35 * ms))
    )

    def post(
        index: int, message: dict[str, object], at_ms: int, within: int | None
    ) -> RecordedStep:
        body = json.dumps(message).encode()
        return recorded_step(
            index=index,
            kind="http",
            endpoint="POST /messages/",
            method="POST",
            url="http://events.test/messages/",
            request_body=body,
            request_hash=sha256_tag(body),
            status_code=202,
            response_body=b"Accepted",
            start_ns=START + at_ms * ms,
            duration_ns=ms,
            within=within,
        )

    tool = recorded_step(
        index=1,
        kind="tool",
        endpoint="tool:refund",
        method="TOOL",
        url="tool:refund",
        request_body=b"{}",
        request_hash=sha256_tag(b"{}"),
        status_code=200,
        response_body=b"{}",
        start_ns=START + 10 * ms,
        duration_ns=10 * ms,
    )
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"_meta": {"progressToken": 7}},
    }
    steps = (
        stream,
        tool,
        post(2, call, 11, within=1),
        post(3, {"jsonrpc": "2.0", "id": 8, "method": "tools/list"}, 30, within=None),
    )
    return Run(run_id="r_sse_session", source="test", steps=steps, start_ns=START), pieces


def test_answers_to_a_served_tools_requests_are_left_out_of_the_stream() -> None:
    run, pieces = _session_run()
    stream = run.steps[0]
    found = UnsentAnswers(run).find(stream, pieces, [15 * 10**6, 35 * 10**6])
    assert [[(u.tool, u.within) for u in piece] for piece in found] == [[(1, 2), (1, 2)], []]
    served: set[int] = set()

    def is_served(index: int) -> int:
        return int(index in served)

    # Before the tool is served (the replay waits, or went another way), all of it stays.
    assert without_unsent(pieces[0], found[0], is_served) == pieces[0]
    served.add(1)  # the tool served from the recording: its POST never made
    assert without_unsent(pieces[0], found[0], is_served) == b""
    served.add(2)  # the tool ran and made its POST: the session waits for these answers
    assert without_unsent(pieces[0], found[0], is_served) == pieces[0]


def test_only_whole_events_that_came_while_the_tool_ran_are_left_out() -> None:
    run, pieces = _session_run()
    stream, unsent = run.steps[0], UnsentAnswers(run)
    # The same answer coming after the tool step ended answers another request with id 7.
    assert unsent.find(stream, pieces, [25 * 10**6, 35 * 10**6]) == ()
    # A piece ending within an event is served as it is.
    split = PROGRESS_7 + ANSWER_7[:20]
    assert unsent.find(stream, [split, ANSWER_7[20:] + ANSWER_8], [15 * 10**6, 35 * 10**6]) == ()


def test_events_no_json_reader_can_read_are_served_as_they_are() -> None:
    run, pieces = _session_run()
    deep = b'data: {"jsonrpc": "2.0", "id": ' + b"[" * 100_000 + b"\n\n"
    found = UnsentAnswers(run).find(run.steps[0], [deep, pieces[1]], [15 * 10**6, 35 * 10**6])
    assert found == ()
    # Ids of no JSON-RPC shape (a list, an object) name no request, in a request or an event.
    odd = _rpc({"jsonrpc": "2.0", "id": [7], "result": {}}) + _rpc(
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": {}}}
    )
    steps = list(run.steps)
    body = json.dumps({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/call"}).encode()
    steps[2] = replace(steps[2], step=replace(steps[2].step, request_body=body))
    odd_run = replace(run, steps=tuple(steps))
    assert (
        UnsentAnswers(odd_run).find(run.steps[0], [odd, pieces[1]], [15 * 10**6, 35 * 10**6]) == ()
    )
