"""Replay test fixtures: real recordings, made once per session, in every source format.

The real openai and anthropic SDKs (and httpx for the agent's tools) run against the stand-in
provider under the capture instrumentation, exported by the real ``replay`` exporter into a
store and, beside it, kept as SDK spans for OTLP encoding (the OTLP exporter's own encoder).
Each client's transport is wrapped in a :class:`Tee` that keeps the bytes of every exchange
as they crossed the wire, to compare rebuilt runs with.

Runs recorded (oldest first):

* ``SUPPORT``: the example support agent (OpenAI Chat Completions with tool calls, the HTTP
  tool calls, a streamed last answer), ``seed=7``.
* ``CLAUDE``: one streamed Anthropic Messages call.
* ``ERRORS``: a provider error (HTTP 429), a stream the provider cuts mid-way, and a
  connection refused (a transport error: no response at all).
* ``LARGE``: one chat call recorded with ``OTEL_REPLAY_INLINE_LIMIT=0`` (no inline bodies).
* ``official``: one chat call recorded by ``opentelemetry-instrumentation-openai-v2`` alone
  (no otel-replay), with message content on the span.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_replay
from examples.standin import StandIn
from examples.support_agent import CONVERSATION, SupportAgent
from otel_replay.replay._model import Run
from tests.export._support import Pipeline

SUPPORT = "r_20261121T090000_a1b2c3d4"
CLAUDE = "r_20261121T091000_9a8b7c6d"
LARGE = "r_20261121T092000_0badf00d"
ERRORS = "r_20261121T090500_e5f60718"
KEY = "sk-test-replay-not-a-secret"


@dataclass
class Exchange:
    """One request and its response as they crossed the wire."""

    method: str
    url: str
    request: bytes
    status: int = 0
    response: bytearray = field(default_factory=bytearray)


class Tee:
    """A transport wrapper keeping the bytes of every exchange (httpx or httpx2)."""

    def __init__(self, module: ModuleType, log: list[Exchange]) -> None:
        self._module = module
        self._inner = module.HTTPTransport()
        self._log = log

    def handle_request(self, request: Any) -> Any:
        exchange = Exchange(request.method, str(request.url), request.read())
        self._log.append(exchange)
        response = self._inner.handle_request(request)
        exchange.status = response.status_code
        inner = response.stream

        class Stream(self._module.SyncByteStream):  # type: ignore[name-defined,misc]
            def __iter__(self) -> Iterator[bytes]:
                for chunk in inner:
                    exchange.response.extend(chunk)
                    yield chunk

            def close(self) -> None:
                inner.close()

        return self._module.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=Stream(),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._inner.close()

    def __enter__(self) -> Tee:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Recorded:
    """The recordings: a template store (copy before writing), the SDK spans, and the wire
    exchanges of each run in order."""

    store: Path
    raw: tuple[ReadableSpan, ...]
    official: tuple[ReadableSpan, ...]
    exchanges: dict[str, list[Exchange]]


@contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def teed_openai(standin: StandIn, log: list[Exchange], **options: Any) -> openai.OpenAI:
    """An openai client on the stand-in whose exchanges are kept in ``log``."""
    return openai.OpenAI(
        base_url=standin.openai_base_url,
        api_key=KEY,
        http_client=httpx2.Client(transport=Tee(httpx2, log)),
        **options,
    )


def _support(standin: StandIn, log: list[Exchange]) -> None:
    with (
        otel_replay.run(name="support-agent", seed=7, run_id=SUPPORT),
        teed_openai(standin, log) as client,
        httpx.Client(base_url=standin.tools_url, transport=Tee(httpx, log)) as tools,
    ):
        agent = SupportAgent(client, tools, "gpt-4o-mini")
        for number, question in enumerate(CONVERSATION, start=1):
            agent.ask(question, stream=number == len(CONVERSATION))


def _claude(standin: StandIn, log: list[Exchange]) -> None:
    with (
        otel_replay.run(name="claude-agent", seed=3, run_id=CLAUDE),
        anthropic.Anthropic(
            base_url=standin.anthropic_base_url,
            api_key=KEY,
            http_client=httpx2.Client(transport=Tee(httpx2, log)),
        ) as client,
        client.messages.stream(
            model="claude-sonnet-4-6",
            max_tokens=300,
            system="You are a support agent.",
            messages=[{"role": "user", "content": "Where is my order A-1234?"}],
        ) as stream,
    ):
        stream.until_done()


def _errors(standin: StandIn, log: list[Exchange]) -> None:
    with (
        otel_replay.run(name="flaky", seed=1, run_id=ERRORS),
        teed_openai(standin, log, max_retries=0) as client,
        httpx.Client(transport=Tee(httpx, log)) as tools,
    ):
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(
                model="standin-error", messages=[{"role": "user", "content": "hi"}]
            )
        with pytest.raises(openai.APIError):
            for _ in client.chat.completions.create(
                model="standin-cut", messages=[{"role": "user", "content": "tell me"}], stream=True
            ):
                pass
        with pytest.raises(httpx.ConnectError):
            tools.get(f"http://127.0.0.1:{closed_port()}/orders/A-1234")


def closed_port() -> int:
    """A local TCP port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _large(standin: StandIn, log: list[Exchange]) -> None:
    with (
        otel_replay.run(name="large", seed=5, run_id=LARGE),
        teed_openai(standin, log) as client,
    ):
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hello there"}]
        )


def _official(standin: StandIn, log: list[Exchange]) -> tuple[ReadableSpan, ...]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrumentor = OpenAIInstrumentor()
    tracer = provider.get_tracer("support-agent")
    with _env(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_ONLY"):
        instrumentor.instrument(tracer_provider=provider)
        try:
            with (
                tracer.start_as_current_span("invoke_agent support"),
                teed_openai(standin, log) as client,
            ):
                client.chat.completions.create(
                    model="gpt-4o-mini",
                    messages=[{"role": "user", "content": "Where is my order A-1234?"}],
                )
                for _ in client.chat.completions.create(
                    model="gpt-4o-mini",
                    messages=[{"role": "user", "content": "Hello there"}],
                    stream=True,
                ):
                    pass
        finally:
            instrumentor.uninstrument()
    provider.shutdown()
    return memory.get_finished_spans()


def record(root: Path) -> Recorded:
    """Record the runs into ``root / "store"``."""
    exchanges: dict[str, list[Exchange]] = {
        SUPPORT: [],
        CLAUDE: [],
        ERRORS: [],
        LARGE: [],
        "official": [],
    }
    memory, large = InMemorySpanExporter(), InMemorySpanExporter()
    with StandIn(event_delay=0.001) as standin:
        with Pipeline(root / "store", others=[memory]):
            _support(standin, exchanges[SUPPORT])
            _claude(standin, exchanges[CLAUDE])
            _errors(standin, exchanges[ERRORS])
        with (
            _env(OTEL_REPLAY_INLINE_LIMIT="0"),
            Pipeline(root / "store", others=[large]),
        ):
            _large(standin, exchanges[LARGE])
        official = _official(standin, exchanges["official"])
    raw = memory.get_finished_spans() + large.get_finished_spans()
    return Recorded(root / "store", raw, official, exchanges)


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """The recordings, made once per session."""
    return record(tmp_path_factory.mktemp("replay-recorded"))


@pytest.fixture
def store(recorded: Recorded, tmp_path: Path) -> Path:
    """A private copy of the recorded store."""
    return Path(shutil.copytree(recorded.store, tmp_path / "store"))


def assert_matches_wire(run: Run, recorded: Recorded) -> None:
    """Each step holds the exact bytes of its exchange on the wire, in order."""
    exchanges = recorded.exchanges[run.run_id]
    assert [s.step.index for s in run.steps] == list(range(len(exchanges)))
    for got, exchange in zip(run.steps, exchanges, strict=True):
        assert got.fidelity == "exact"
        assert got.request_body == exchange.request
        assert got.step.status_code == exchange.status
        assert got.step.response_body == bytes(exchange.response)
        assert got.step.method == exchange.method
        assert got.step.complete and got.step.error_type is None
        if got.step.kind == "http":
            assert got.step.url == exchange.url


def content_type(headers: tuple[tuple[str, str], ...]) -> str:
    values = [v for k, v in headers if k.lower() == "content-type"]
    return values[0].split(";")[0] if values else ""


# -- OTLP encodings ----------------------------------------------------------------------------


def otlp_request(spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
    """The OTLP export request the real OTLP exporter would send for ``spans``."""
    return encode_spans(spans)


def protobuf_json(spans: Sequence[ReadableSpan], **options: Any) -> dict[str, Any]:
    """The protobuf JSON mapping of the export request (base64 ids, int64 as strings, enum
    names, camelCase keys)."""
    document: dict[str, Any] = json_format.MessageToDict(otlp_request(spans), **options)
    return document


def collector_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """As the Collector's file exporter writes it: hex ids and enums as numbers."""
    return request_json(otlp_request(spans))


def request_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """An export request as the Collector's file exporter writes it in JSON."""
    return _rewrite_ids_and_enums(json_format.MessageToDict(request))


def _rewrite_ids_and_enums(value: Any) -> Any:
    kinds = {"SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3}
    codes = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
    if isinstance(value, list):
        return [_rewrite_ids_and_enums(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key in ("traceId", "spanId", "parentSpanId") and isinstance(item, str):
            out[key] = base64.b64decode(item).hex()
        elif key == "kind" and isinstance(item, str):
            out[key] = kinds[item]
        elif key == "code" and isinstance(item, str):
            out[key] = codes[item]
        else:
            out[key] = _rewrite_ids_and_enums(item)
    return out


def ints_as_numbers(value: Any) -> Any:
    """Every int64 written as a JSON string turned into a JSON number."""
    if isinstance(value, list):
        return [ints_as_numbers(v) for v in value]
    if not isinstance(value, dict):
        return value
    return {
        key: int(item)
        if key in ("intValue", "startTimeUnixNano", "endTimeUnixNano", "timeUnixNano")
        and isinstance(item, str)
        else ints_as_numbers(item)
        for key, item in value.items()
    }


def one_span_per_line(spans: Sequence[ReadableSpan], encode: Callable[..., Any]) -> bytes:
    """JSON lines with each span in an export request of its own (a trace split across
    lines and ResourceSpans)."""
    return b"".join(json.dumps(encode([span])).encode() + b"\n" for span in spans)


def run_spans(recorded: Recorded, *run_ids: str) -> tuple[ReadableSpan, ...]:
    """The recorded SDK spans of the given runs."""
    return tuple(
        s for s in recorded.raw if (s.attributes or {}).get("replay.run.id") in set(run_ids)
    )


def run_pytest(folder: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """A pytest session of its own in ``folder`` (one process: no xdist), its summary lines
    uncut, the repository on the path; ``flags`` go before the tests."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist"]
    return subprocess.run(
        [*command, "-rA", "-q", *flags],
        cwd=folder,
        env={**os.environ, "COLUMNS": "400", "PYTHONPATH": str(Path(__file__).parents[2])},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
