"""A replayed response body is one pass, as a network stream is: iterated again (the openai
SDK drains a stream after its last event), it goes on where it stopped instead of starting
over."""

from __future__ import annotations

import asyncio

import httpx
import httpx2
import pytest

import otel_replay
from otel_replay._canonical import sha256_tag
from otel_replay.replay import Run
from tests.replay._recorded import recorded_step

URL = "http://llm.test/v1/chat/completions"
REQUEST = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":true}'
EVENTS = (b'data: {"n":1}\n\n', b'data: {"n":2}\n\n', b"data: [DONE]\n\n")
WHOLE = b'{"id":"chatcmpl-1","choices":[]}'


def _run(streamed: bool) -> Run:
    body = b"".join(EVENTS) if streamed else WHOLE
    chunks = tuple((len(e), 1000 * (n + 1)) for n, e in enumerate(EVENTS)) if streamed else ()
    kind = "text/event-stream" if streamed else "application/json"
    step = recorded_step(
        index=0,
        kind="llm",
        endpoint="openai.chat_completions",
        method="POST",
        url=URL,
        request_body=REQUEST,
        request_hash=sha256_tag(REQUEST),
        status_code=200,
        response_headers=(("content-type", kind),),
        response_body=body,
        fidelity="exact",
        chunks=chunks,
        duration_ns=5000,
    )
    return Run(run_id="r_streams", source="test", steps=(step,))


@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
def test_a_replayed_body_iterated_again_goes_on_where_it_stopped(
    module: object, streamed: bool
) -> None:
    client = module.Client()  # type: ignore[attr-defined]
    with (
        otel_replay.replaying(_run(streamed)) as result,
        client.stream("POST", URL, content=REQUEST) as response,
    ):
        pieces = iter(response.stream)
        first = next(pieces)
        del pieces  # given up after one piece, as a reader that found what it wanted
        rest = list(response.stream)
        again = list(response.stream)
    assert result.identical, result.first_divergence
    expected = EVENTS if streamed else (WHOLE,)
    assert [first, *rest] == list(expected)
    assert again == []


def test_an_async_replayed_stream_iterated_again_goes_on_where_it_stopped() -> None:
    async def read() -> tuple[bytes, list[bytes], list[bytes]]:
        async with (
            httpx.AsyncClient() as client,
            client.stream("POST", URL, content=REQUEST) as response,
        ):
            pieces = aiter(response.stream)
            first = await anext(pieces)
            await pieces.aclose()  # type: ignore[attr-defined]
            rest = [piece async for piece in response.stream]
            again = [piece async for piece in response.stream]
        return first, rest, again

    with otel_replay.replaying(_run(streamed=True)) as result:
        first, rest, again = asyncio.run(read())
    assert result.identical, result.first_divergence
    assert [first, *rest] == list(EVENTS)
    assert again == []
