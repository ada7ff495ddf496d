"""A request the recording saw interrupted (Ctrl-C while it was on its way) is interrupted
again on replay, with ``KeyboardInterrupt`` itself: as a transport error the openai SDK retried
it, and the replay said "diverged, already served" instead of ending as the program did."""

from __future__ import annotations

import asyncio
import importlib.abc
import sys

# A ResourceWarning shown while the import spy listens (a process another test on this worker
# left behind) imports tracemalloc; imported here, it asks no finder then.
import tracemalloc  # noqa: F401
from dataclasses import replace

import aiohttp
import httpx
import httpx2
import openai
import pytest
import requests

import otel_replay
from otel_replay._canonical import sha256_tag
from otel_replay.replay import Run
from tests.replay._recorded import recorded_step

BASE = "http://127.0.0.1:9/v1"  # nothing listens there
REQUEST = b'{"messages":[{"role":"user","content":"hi"}],"model":"gpt-4o-mini"}'


def _run(url: str, body: bytes, kind: str, endpoint: str) -> Run:
    step = recorded_step(
        index=0,
        kind=kind,
        endpoint=endpoint,
        method="POST",
        url=url,
        request_body=body,
        request_hash=sha256_tag(body),
        status_code=None,
        response_headers=(),
        response_body=b"",
        fidelity="exact",
        complete=False,
        error_type="KeyboardInterrupt",
    )
    return Run(run_id="r_interrupted", source="test", steps=(step,))


def test_the_openai_sdk_is_interrupted_again_and_does_not_retry() -> None:
    run = _run(f"{BASE}/chat/completions", REQUEST, "llm", "openai.chat_completions")
    client = openai.OpenAI(base_url=BASE, api_key="sk-interrupted", max_retries=2)
    with pytest.raises(KeyboardInterrupt), otel_replay.replaying(run) as result:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )
    assert [step.recorded for step in result.steps] == [0]  # asked once: no retry
    assert result.identical, result.first_divergence
    assert result.agent.error == "KeyboardInterrupt"


@pytest.mark.parametrize("client", ["httpx", "requests"])
def test_every_http_stack_is_interrupted_again(client: str) -> None:
    url = "http://tools.test/orders"
    run = _run(url, b"{}", "http", "POST /orders")
    with pytest.raises(KeyboardInterrupt), otel_replay.replaying(run):
        if client == "httpx":
            httpx.post(url, content=b"{}")
        else:
            requests.post(url, data=b"{}", timeout=5)


# error.type is recorded input: a name a module answers lazily (httpx2's deprecated "main"
# imports httpx2._main with a warning; aiohttp's gunicorn workers import aiohttp.worker and
# gunicorn) or a BaseException's name is still served as the client's own transport error.
ODD_ERRORS = [
    "httpx2.main",
    "aiohttp.GunicornWebWorker",
    "urllib3.exceptions.__getattr__",
    "SystemExit",
    "GeneratorExit",
    "BaseException",
    "asyncio.CancelledError",
    "E" * 10_000,
]


class _ImportSpy(importlib.abc.MetaPathFinder):
    """Notes every module the process asks for (and finds none itself)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        self.asked.append(name)


async def _aiohttp_post(url: str) -> None:
    async with aiohttp.ClientSession() as session, session.post(url, data=b"{}") as response:
        await response.read()


def _post(client: str, url: str) -> None:
    if client == "httpx":
        httpx.post(url, content=b"{}")
    elif client == "httpx2":
        httpx2.post(url, content=b"{}")
    elif client == "requests":
        requests.post(url, data=b"{}", timeout=5)
    else:
        asyncio.run(_aiohttp_post(url))


@pytest.mark.parametrize(
    ("client", "expected"),
    [
        ("httpx", httpx.TransportError),
        ("httpx2", httpx2.TransportError),
        ("requests", requests.ConnectionError),
        ("aiohttp", aiohttp.ClientError),
    ],
)
def test_an_odd_error_type_is_a_transport_error_and_imports_nothing(
    client: str, expected: type[Exception]
) -> None:
    url = "http://tools.test/orders"
    recorded = _run(url, b"{}", "http", "POST /orders")

    def failing(error_type: str) -> Run:
        return replace(
            recorded,
            steps=(
                replace(
                    recorded.steps[0], step=replace(recorded.steps[0].step, error_type=error_type)
                ),
            ),
        )

    with pytest.raises(expected), otel_replay.replaying(failing("ConnectionResetError")):
        _post(client, url)  # the client's own first imports happen here, not under the spy
    spy = _ImportSpy()
    sys.meta_path.insert(0, spy)
    try:
        for error_type in ODD_ERRORS:
            with pytest.raises(expected), otel_replay.replaying(failing(error_type)):
                _post(client, url)
    finally:
        sys.meta_path.remove(spy)
    assert spy.asked == []
