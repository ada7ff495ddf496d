"""The tee: the application sees exactly what the transport produced, and the step records it."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from otel_replay.testing import CaptureKit
from tests.capture.conftest import Failure, scripted_transport

CHUNKS = [b"data: one\n\n", b"data: two\n\n", b"data: three\n\n", b"data: [DONE]\n\n"]
URL = "http://tools.local/stream"


def _read_sync(module: ModuleType, transport: Any, close_after: int | None = None) -> list[bytes]:
    got: list[bytes] = []
    with module.Client(transport=transport) as client, client.stream("GET", URL) as response:
        for chunk in response.iter_raw():
            got.append(chunk)
            if close_after is not None and len(got) == close_after:
                break
    return got


def _read_async(module: ModuleType, transport: Any, close_after: int | None = None) -> list[bytes]:
    async def go() -> list[bytes]:
        got: list[bytes] = []
        async with (
            module.AsyncClient(transport=transport) as client,
            client.stream("GET", URL) as response,
        ):
            async for chunk in response.aiter_raw():
                got.append(chunk)
                if close_after is not None and len(got) == close_after:
                    break
        return got

    return asyncio.run(go())


@pytest.fixture(params=["sync", "async"])
def read(request: pytest.FixtureRequest) -> Any:
    return _read_sync if request.param == "sync" else _read_async


def _pick(pair: tuple[Any, Any], read: Any) -> Any:
    return pair[0] if read is _read_sync else pair[1]


def test_chunks_identical_with_and_without_instrumentation(
    client_module: ModuleType, read: Any
) -> None:
    bare = read(client_module, _pick(scripted_transport(client_module, CHUNKS), read))
    with CaptureKit() as kit:
        seen = read(client_module, _pick(scripted_transport(client_module, CHUNKS), read))
        (span,) = kit.spans()
    assert bare == seen == CHUNKS
    attrs = span["attributes"]
    body = b"".join(CHUNKS)
    assert attrs["replay.response.hash"] == "sha256:" + hashlib.sha256(body).hexdigest()
    assert attrs["replay.response.size"] == len(body)
    assert attrs["replay.response.complete"] is True
    assert attrs["http.response.status_code"] == 200
    assert span["status"] == "UNSET"


def test_early_close_records_what_was_read(client_module: ModuleType, read: Any) -> None:
    with CaptureKit() as kit:
        seen = read(client_module, _pick(scripted_transport(client_module, CHUNKS), read), 2)
        (span,) = kit.spans()
    assert seen == CHUNKS[:2]
    attrs = span["attributes"]
    assert attrs["replay.response.complete"] is False
    partial = b"".join(CHUNKS[:2])
    assert attrs["replay.response.hash"] == "sha256:" + hashlib.sha256(partial).hexdigest()
    assert "error.type" not in attrs


def _drained_sync(module: ModuleType, transport: Any) -> tuple[list[bytes], list[bytes]]:
    with module.Client(transport=transport) as client, client.stream("GET", URL) as response:
        read, raw = [], response.iter_raw()  # held, as the SDK holds it, while it drains
        for chunk in raw:
            read.append(chunk)
            if chunk == CHUNKS[-1]:
                break
        return read, list(response.stream)


def _drained_async(module: ModuleType, transport: Any) -> tuple[list[bytes], list[bytes]]:
    async def go() -> tuple[list[bytes], list[bytes]]:
        async with (
            module.AsyncClient(transport=transport) as client,
            client.stream("GET", URL) as response,
        ):
            read, raw = [], response.aiter_raw()
            async for chunk in raw:
                read.append(chunk)
                if chunk == CHUNKS[-1]:
                    break
            return read, [chunk async for chunk in response.stream]

    return asyncio.run(go())


def test_a_stream_iterated_again_goes_on_where_it_stopped(
    client_module: ModuleType, read: Any
) -> None:
    """The openai SDK drains ``response.stream`` again after ``[DONE]``. Over a stream that
    starts over when iterated again (a replay's recorded chunks, httpx's ByteStream, a mock),
    the step recorded the body twice (a replayed stream then differed from its recording)."""
    drained = _drained_sync if read is _read_sync else _drained_async
    with CaptureKit() as kit:
        seen, again = drained(client_module, _pick(scripted_transport(client_module, CHUNKS), read))
        (span,) = kit.spans()
    assert seen == CHUNKS and again == []  # one pass, as over the network
    attrs = span["attributes"]
    body = b"".join(CHUNKS)
    assert attrs["replay.response.hash"] == "sha256:" + hashlib.sha256(body).hexdigest()
    assert attrs["replay.response.size"] == len(body)
    assert attrs["replay.response.complete"] is True


def test_error_mid_stream_is_recorded_and_reraised_unchanged(
    client_module: ModuleType, read: Any
) -> None:
    boom = Failure("connection reset by peer")
    pair = scripted_transport(client_module, CHUNKS, fail_after=2, fail_with=boom)
    with CaptureKit() as kit:
        with pytest.raises(Failure) as info:
            read(client_module, _pick(pair, read))
        (span,) = kit.spans()
    assert info.value is boom
    attrs = span["attributes"]
    assert attrs["error.type"] == "tests.capture.conftest.Failure"
    assert attrs["replay.response.complete"] is False
    assert span["status"] == "ERROR"


def test_transport_error_before_response(client_module: ModuleType) -> None:
    def refuse(request: Any) -> Any:
        raise client_module.ConnectError("refused", request=request)

    with CaptureKit() as kit:
        with (
            client_module.Client(transport=client_module.MockTransport(refuse)) as client,
            pytest.raises(client_module.ConnectError),
        ):
            client.get(URL)
        (span,) = kit.spans()
    assert span["attributes"]["error.type"] == f"{client_module.__name__}.ConnectError"
    assert span["status"] == "ERROR"
    assert "replay.response.hash" not in span["attributes"]


def test_http_error_status_sets_error_type(client_module: ModuleType) -> None:
    pair = scripted_transport(
        client_module,
        [b'{"detail":"nope"}'],
        status=503,
        headers={"content-type": "application/json"},
    )
    with CaptureKit() as kit, client_module.Client(transport=pair[0]) as client:
        assert client.get(URL).status_code == 503
        (span,) = kit.spans()
    assert span["attributes"]["error.type"] == "503"
    assert span["attributes"]["http.response.status_code"] == 503
    assert span["status"] == "ERROR"


def _open_stream(module: ModuleType, transport: Any, chunks: int) -> tuple[Any, Any]:
    """A streamed response of which ``chunks`` chunks were read, and its chunk iterator
    (httpx2 closes the response when that iterator goes away); never closed."""
    client = module.Client(transport=transport)
    response = client.send(client.build_request("GET", URL), stream=True)
    raw = response.iter_raw()
    for _ in range(chunks):
        next(raw)
    return response, raw


def test_dropped_stream_ends_its_step_with_what_was_read(client_module: ModuleType) -> None:
    with CaptureKit() as kit:
        response = _open_stream(client_module, scripted_transport(client_module, CHUNKS)[0], 2)
        assert kit.spans() == []  # still open: nothing to report yet
        del response  # and its iterator
        gc.collect()  # the response sits in a reference cycle of the client library's
        with client_module.Client(transport=scripted_transport(client_module, CHUNKS)[0]) as c:
            c.get(URL).read()
        dropped, later = kit.spans()
    assert dropped["attributes"]["replay.step.index"] == 0
    assert dropped["attributes"]["replay.response.complete"] is False
    partial = b"".join(CHUNKS[:2])
    assert dropped["attributes"]["replay.response.hash"] == (
        "sha256:" + hashlib.sha256(partial).hexdigest()
    )
    assert later["attributes"]["replay.response.complete"] is True


_EXIT_SCRIPT = """
import sys
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry import trace
import httpx
from otel_replay.capture.instrumentor import ReplayInstrumentor
from tests.capture.conftest import scripted_transport
from tests.capture.test_streams import CHUNKS, _open_stream

provider = TracerProvider()
provider.add_span_processor(
    BatchSpanProcessor(ConsoleSpanExporter(formatter=lambda span: span.to_json(None) + "\\n"))
)
trace.set_tracer_provider(provider)
ReplayInstrumentor().instrument()
held = _open_stream(httpx, scripted_transport(httpx, CHUNKS)[0], 1)
sys.exit(0)  # with the stream still open
"""


@pytest.mark.subprocess
def test_stream_open_at_exit_is_recorded_as_incomplete() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _EXIT_SCRIPT],
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    spans = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    # The process run's root span ends at exit too, after the step, where the step ended.
    root, span = sorted(spans, key=lambda s: s["name"] != "invoke_agent python")
    assert span["parent_id"] == root["context"]["span_id"]
    assert root["end_time"] == span["end_time"]
    attrs = span["attributes"]
    assert attrs["replay.response.complete"] is False
    assert attrs["replay.response.size"] == len(CHUNKS[0])
    assert attrs["replay.response.body"] == CHUNKS[0].decode()
