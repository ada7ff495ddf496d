"""Beside the OpenTelemetry requests, urllib3 and aiohttp-client instrumentations: one of our
steps per exchange, their span around it (they trace the library call, redirects included;
we trace each exchange on the wire); and an exchange crossing two hooked layers is one step."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import aiohttp
import httpx
import pytest
import requests
import urllib3
from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
from opentelemetry.instrumentation.requests import RequestsInstrumentor
from opentelemetry.instrumentation.urllib3 import URLLib3Instrumentor

from otel_replay.testing import CaptureKit
from tests.transports._calls import chat


@pytest.fixture
def official() -> Iterator[CaptureKit]:
    with CaptureKit() as kit:
        instrumentors = [RequestsInstrumentor(), URLLib3Instrumentor(), AioHttpClientInstrumentor()]
        for instrumentor in instrumentors:
            instrumentor.instrument(tracer_provider=kit.tracer_provider)
        try:
            yield kit
        finally:
            for instrumentor in instrumentors:
                instrumentor.uninstrument()


def _ours_inside_theirs(spans: list[dict[str, Any]], scope: str) -> None:
    theirs = [i for i, s in enumerate(spans) if s["scope"] == scope]
    ours = [s for s in spans if s["scope"] == "otel_replay"]
    assert len(theirs) == 1 and len(ours) == 1, [(s["name"], s["scope"]) for s in spans]
    assert ours[0]["parent"] == theirs[0]
    assert "replay.step.index" in ours[0]["attributes"]
    assert not any(k.startswith("replay.") for k in spans[theirs[0]]["attributes"])


def test_requests_one_step_inside_the_requests_span(official: CaptureKit, standin: Any) -> None:
    # requests' instrumentation suppresses urllib3's under it: one span of theirs.
    requests.get(f"{standin.tools_url}/orders/A-1234")
    _ours_inside_theirs(official.spans(), "opentelemetry.instrumentation.requests")


def test_a_model_call_through_requests_is_one_chat_step(official: CaptureKit, standin: Any) -> None:
    with requests.post(
        f"{standin.openai_base_url}/chat/completions", json=chat("Hi", stream=True), stream=True
    ) as reply:
        list(reply.iter_lines())
    spans = official.spans()
    _ours_inside_theirs(spans, "opentelemetry.instrumentation.requests")
    (chat_span,) = [s for s in spans if s["scope"] == "otel_replay"]
    assert chat_span["name"] == "chat gpt-4o-mini"
    assert chat_span["attributes"]["replay.response.complete"] is True


def test_urllib3_one_step_inside_the_urllib3_span(official: CaptureKit, standin: Any) -> None:
    urllib3.request("GET", f"{standin.tools_url}/orders/A-1234")
    _ours_inside_theirs(official.spans(), "opentelemetry.instrumentation.urllib3")


def test_aiohttp_one_step_inside_the_aiohttp_span(official: CaptureKit, standin: Any) -> None:
    async def go() -> None:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{standin.tools_url}/orders/A-1234") as got,
        ):
            await got.read()

    asyncio.run(go())
    _ours_inside_theirs(official.spans(), "opentelemetry.instrumentation.aiohttp_client")


class _Urllib3Transport(httpx.BaseTransport):
    """An httpx transport that sends through urllib3 (as some SDK adapters do)."""

    def __init__(self) -> None:
        self._pool = urllib3.PoolManager()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        got = self._pool.request(
            request.method, str(request.url), body=request.read(), headers=dict(request.headers)
        )
        return httpx.Response(got.status, headers=list(got.headers.items()), content=got.data)


def test_an_exchange_through_two_hooked_layers_is_one_step(standin: Any) -> None:
    with CaptureKit() as kit, httpx.Client(transport=_Urllib3Transport()) as client:
        assert client.get(f"{standin.tools_url}/orders/A-1234").status_code == 200
    _root, span = kit.spans()  # one step, under the process run's root span
    assert span["attributes"]["replay.step.index"] == 0
