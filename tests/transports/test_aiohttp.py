"""aiohttp: captured byte-exact with the step spans, replayed with the stand-in stopped (the
same bytes in the same pieces to ``iter_any``, ``readline`` and ``iter_chunked``), secrets
kept out, and an unmatched request refused as an ``aiohttp.ClientConnectionError``."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import otel_replay
from otel_replay.errors import UnmatchedRequestError
from otel_replay.replay.sources import load_run
from otel_replay.testing import CaptureKit
from tests.export._support import stored_bytes
from tests.transports._calls import SECRETS, aiohttp_calls, chat
from tests.transports.conftest import DEAD, Recording


def _calls(base: str) -> list[Any]:
    return asyncio.run(aiohttp_calls(base))


def test_aiohttp_records_each_exchange_byte_exact(record: Recording) -> None:
    store, run_id, recorded, received = record(_calls)
    run = load_run(run_id, store=store)
    assert len(run.steps) == len(received) == 5
    assert all(s.fidelity == "exact" for s in run.steps)
    for step, sent in zip([s.step for s in run.steps], received, strict=True):
        assert step.complete and step.error_type is None
        assert step.request_body == sent.body
        assert step.request_hash == "sha256:" + hashlib.sha256(sent.body).hexdigest()
    assert [s.step.kind for s in run.steps] == ["http", "llm", "llm", "llm", "llm"]
    assert run.steps[0].step.response_body.decode() == recorded[0][1]
    streamed = run.steps[2].step
    assert recorded[2].encode() == streamed.response_body
    assert len(streamed.chunks) > 3


def test_spans_carry_the_http_and_genai_conventions(standin: Any) -> None:
    async def go() -> None:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{standin.tools_url}/orders/A-1234") as got:
                await got.read()
            async with http.post(
                f"{standin.openai_base_url}/chat/completions", json=chat("Hi", stream=True)
            ) as streamed:
                async for _ in streamed.content:
                    pass

    with CaptureKit() as kit:
        asyncio.run(go())
    root, tool, model = kit.spans()  # under the process run's root span
    assert (tool["name"], model["name"]) == ("GET", "chat gpt-4o-mini")
    assert root["name"].startswith("invoke_agent ") and tool["parent"] == model["parent"] == 0
    assert tool["attributes"]["url.full"] == f"{standin.tools_url}/orders/A-1234"
    assert tool["attributes"]["http.response.status_code"] == 200
    assert tool["attributes"]["server.port"] == standin.port
    assert model["attributes"]["gen_ai.provider.name"] == "openai"
    assert model["attributes"]["replay.response.complete"] is True
    assert model["attributes"]["gen_ai.response.finish_reasons"] == ["stop"]


def test_a_response_released_early_is_recorded_incomplete(standin: Any) -> None:
    async def go() -> None:
        async with aiohttp.ClientSession() as http:
            streamed = await http.post(
                f"{standin.openai_base_url}/chat/completions",
                json=chat("Tell me a long story.", stream=True),
            )
            await streamed.content.readline()
            streamed.release()

    with CaptureKit() as kit:
        asyncio.run(go())
    _root, span = kit.spans()
    assert span["attributes"]["replay.response.complete"] is False
    assert "error.type" not in span["attributes"]


def test_a_replay_serves_the_same_bytes_without_the_network(
    record: Recording, connects: list[str]
) -> None:
    store, run_id, recorded, _ = record(_calls)
    connects.clear()
    with otel_replay.replaying(run_id, store=store) as result:
        replayed = _calls(DEAD)
    assert replayed == recorded  # iter_any's pieces, readline's lines, iter_chunked's sizes
    assert result.identical, result.first_divergence
    assert dict(result.matched()) == {"hash": 5}
    assert result.network_attempts == [] and connects == []


def test_recorded_timing_paces_the_stream(record: Recording) -> None:
    def stream(base: str) -> list[Any]:
        async def go() -> list[Any]:
            async with (
                aiohttp.ClientSession() as http,
                http.post(f"{base}/v1/chat/completions", json=chat("Hi", stream=True)) as got,
            ):
                return [c async for c in got.content.iter_any()]

        return asyncio.run(go())

    store, run_id, recorded, _ = record(stream)
    with otel_replay.replaying(run_id, store=store, timing="recorded") as result:
        replayed = stream(DEAD)
    assert b"".join(replayed) == b"".join(recorded)
    # One piece per chunk as it arrived, each no sooner than it arrived.
    assert [len(piece) for piece in replayed] == [
        size for size, _ in result.run.steps[0].step.chunks
    ]
    assert result.identical


def test_an_unmatched_request_is_an_aiohttp_connection_error(record: Recording) -> None:
    store, run_id, _, _ = record(_calls)

    async def other() -> None:
        async with aiohttp.ClientSession() as http:
            await http.get(f"{DEAD}/tools/orders/Z-9999")

    with (
        otel_replay.replaying(run_id, store=store) as result,
        pytest.raises(aiohttp.ClientConnectionError) as raised,
    ):
        asyncio.run(other())
    assert isinstance(raised.value, UnmatchedRequestError)
    assert "step 0 GET /tools/orders/A-1234" in str(raised.value)
    assert [s.how for s in result.steps] == ["none"]
    assert result.network_attempts == []


def test_secrets_never_reach_the_store(record: Recording) -> None:
    store, _, _, received = record(_calls)
    assert received[0].header("x-api-key") and "api_key=" in received[0].query
    disk = stored_bytes(Path(store))
    assert [s for s in SECRETS if s.encode() in disk] == []
    assert b"api_key=REDACTED" in disk


def test_a_total_timeout_replays_as_the_timeout_it_was(record: Recording) -> None:
    # aiohttp raises asyncio's TimeoutError (not a ClientError) when `total` runs out: an
    # agent that catches it as a timeout must catch the replayed one too.
    def slow(base: str) -> str:
        async def go() -> str:
            async with aiohttp.ClientSession() as http:
                try:
                    async with http.post(
                        f"{base}/v1/chat/completions",
                        json={**chat("Hi"), "model": "standin-slow"},
                        timeout=aiohttp.ClientTimeout(total=0.2),
                    ) as got:
                        return await got.text()
                except asyncio.TimeoutError as err:
                    return f"timed out: {type(err).__name__}"

        return asyncio.run(go())

    store, run_id, recorded, _ = record(slow)
    assert recorded == "timed out: TimeoutError"
    with otel_replay.replaying(run_id, store=store) as result:
        replayed = slow(DEAD)
    assert replayed == recorded
    assert result.identical, result.first_divergence
