"""What a user sees of a request the recording lacks, through each HTTP client: an otel-replay
error with a public name (``otel_replay.errors``), in the traceback as in ``except`` clauses,
never a class made inside a function."""

from __future__ import annotations

import asyncio
import importlib
import pickle
import traceback
from collections.abc import Callable

import pytest

import otel_replay
from otel_replay import errors
from otel_replay._canonical import sha256_tag
from otel_replay.replay import Run
from tests.replay._recorded import recorded_step

URL = "http://other.test/x"


def _run() -> Run:
    step = recorded_step(
        index=0,
        kind="http",
        endpoint="POST /orders",
        method="POST",
        url="http://tools.test/orders",
        request_body=b"{}",
        request_hash=sha256_tag(b"{}"),
        status_code=200,
        response_headers=(("content-type", "application/json"),),
        response_body=b"{}",
        fidelity="exact",
    )
    return Run("r_names", "test", (step,))


def _httpx(name: str) -> Callable[[], None]:
    def call() -> None:
        pytest.importorskip(name).get(URL)

    return call


def _requests() -> None:
    import requests

    requests.get(URL)


def _urllib3() -> None:
    import urllib3

    urllib3.PoolManager().request("GET", URL, retries=False)


def _aiohttp() -> None:
    import aiohttp

    async def get() -> None:
        async with aiohttp.ClientSession() as session, session.get(URL) as response:
            await response.read()

    asyncio.run(get())


@pytest.mark.parametrize(
    ("client", "call", "raised", "ours"),
    [
        ("httpx", _httpx("httpx"), "otel_replay.errors.UnmatchedRequestError", None),
        ("httpx2", _httpx("httpx2"), "otel_replay.errors.UnmatchedRequestError", None),
        # Below requests and urllib3 it is a refused connection, wrapped as they wrap one.
        (
            "requests",
            _requests,
            "requests.exceptions.ConnectionError",
            "otel_replay.errors.UnmatchedConnectionError",
        ),
        (
            "urllib3",
            _urllib3,
            "urllib3.exceptions.ProtocolError",
            "otel_replay.errors.UnmatchedConnectionError",
        ),
        ("aiohttp", _aiohttp, "otel_replay.errors.UnmatchedAiohttpRequestError", None),
    ],
)
def test_an_unmatched_request_is_an_error_with_a_public_name(
    client: str, call: Callable[[], None], raised: str, ours: str | None
) -> None:
    with pytest.raises(BaseException) as caught, otel_replay.replaying(_run()):
        call()
    exc = caught.value
    assert f"{type(exc).__module__}.{type(exc).__qualname__}" == raised
    lines = traceback.format_exception(exc)
    ours = ours or raised
    line = f"{ours}: otel-replay: no recorded step of run 'r_names' matches GET {URL}"
    assert any(text.startswith(line) for text in lines), "".join(lines)
    unmatched = exc if ours == raised else exc.__context__
    while unmatched is not None and not isinstance(unmatched, errors.UnmatchedRequestError):
        unmatched = unmatched.__context__
    assert unmatched is not None
    cls = type(unmatched)
    module = importlib.import_module(cls.__module__)
    assert getattr(module, cls.__qualname__) is cls  # found by its name, as pickle finds it
    assert "<locals>" not in cls.__qualname__ and "._" not in cls.__module__
    assert type(pickle.loads(pickle.dumps(unmatched))) is cls


def test_the_aiohttp_error_is_caught_as_aiohttp_and_otel_replay_errors_are() -> None:
    import aiohttp

    from otel_replay.errors import UnmatchedAiohttpRequestError  # type: ignore[attr-defined]

    assert issubclass(UnmatchedAiohttpRequestError, aiohttp.ClientConnectionError)
    assert issubclass(UnmatchedAiohttpRequestError, errors.UnmatchedConnectionError)
    assert errors.UnmatchedAiohttpRequestError is UnmatchedAiohttpRequestError
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        errors.Nothing  # noqa: B018
