"""examples/otlp_sink.py receives what the real OTel SDK exporters send, over gRPC and HTTP."""

from __future__ import annotations

import json
import math
import os
import select
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
    OTLPMetricExporter as GrpcMetricExporter,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
    OTLPMetricExporter as HttpMetricExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # examples/ is imported from the repository root

from examples.otlp_sink import OtlpSink, format_span  # noqa: E402

SECRET_LOOKING = "needle-7f3a9c"  # a value the raw bytes must carry verbatim
RESOURCE = Resource.create({"service.name": "sink-test", "deployment.environment": "ci"})


@pytest.fixture
def sink() -> Iterator[OtlpSink]:
    with OtlpSink() as s:
        yield s


def _span_exporter(sink: OtlpSink, transport: str, gzip: bool) -> SpanExporter:
    if transport == "grpc":
        compression = grpc.Compression.Gzip if gzip else None
        return GrpcSpanExporter(
            endpoint=sink.grpc_endpoint, insecure=True, compression=compression, timeout=5
        )
    compression = HttpCompression.Gzip if gzip else HttpCompression.NoCompression
    return HttpSpanExporter(
        endpoint=f"{sink.http_endpoint}/v1/traces", compression=compression, timeout=5
    )


def _record_agent_step(exporter: SpanExporter) -> None:
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("sink.test.scope", "1.2.3")
    try:
        with (
            tracer.start_as_current_span("invoke_agent demo", kind=SpanKind.INTERNAL),
            tracer.start_as_current_span("chat gpt-4o-mini", kind=SpanKind.CLIENT) as span,
        ):
            span.set_attributes(
                {
                    "replay.run.id": "run-1",
                    "replay.step.index": 3,
                    "replay.code.dirty": True,
                    "replay.response.complete": False,
                    "gen_ai.request.temperature": 0.25,
                    "gen_ai.response.finish_reasons": ["stop", "length"],
                    "replay.test.ints": [1, 2, 3],
                    "replay.request.body": f'{{"input":"{SECRET_LOOKING}"}}',
                }
            )
            span.add_event("gen_ai.choice", {"index": 0, "finish_reason": "stop"})
            span.set_status(Status(StatusCode.ERROR, "upstream 529"))
    finally:
        provider.shutdown()


@pytest.mark.parametrize(
    ("transport", "gzip"),
    [("grpc", False), ("grpc", True), ("http", False), ("http", True)],
)
def test_spans_arrive_decoded(sink, transport, gzip):
    _record_agent_step(_span_exporter(sink, transport, gzip))

    spans = sink.wait_for_spans(2, timeout=5)
    child, parent = spans  # children end, and so are exported, first
    assert child["name"] == "chat gpt-4o-mini"
    assert child["kind"] == "CLIENT"
    assert parent["kind"] == "INTERNAL"
    assert parent["parent_span_id"] is None
    assert child["parent_span_id"] == parent["span_id"]
    assert child["trace_id"] == parent["trace_id"]
    assert len(child["trace_id"]) == 32 and len(child["span_id"]) == 16
    assert 0 < child["start_ns"] <= child["end_ns"]
    assert child["status"] == {"code": "ERROR", "message": "upstream 529"}
    attrs = child["attributes"]
    assert attrs["replay.run.id"] == "run-1"
    assert attrs["replay.step.index"] == 3 and type(attrs["replay.step.index"]) is int
    assert attrs["replay.code.dirty"] is True
    assert attrs["replay.response.complete"] is False
    assert attrs["gen_ai.request.temperature"] == 0.25
    assert attrs["gen_ai.response.finish_reasons"] == ["stop", "length"]
    assert attrs["replay.test.ints"] == [1, 2, 3]
    assert child["events"][0]["name"] == "gen_ai.choice"
    assert child["events"][0]["attributes"] == {"index": 0, "finish_reason": "stop"}
    assert child["resource"]["service.name"] == "sink-test"
    assert child["scope"] == "sink.test.scope"
    assert child["transport"] == transport

    # Bodies are kept after transport decompression, so exported values can be searched.
    assert SECRET_LOOKING.encode() in sink.raw_bytes()
    assert b"chat gpt-4o-mini" in sink.raw_bytes()
    assert [(r.transport, r.signal) for r in sink.requests()] == [(transport, "traces")] * 2


def _export_metrics(exporter) -> None:
    # An infinite interval starts no reader thread, so force_flush() does the one export.
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=math.inf)
    provider = MeterProvider(metric_readers=[reader], resource=RESOURCE)
    meter = provider.get_meter("sink.test.meter")
    duration = meter.create_histogram(
        "gen_ai.client.operation.duration",
        unit="s",
        explicit_bucket_boundaries_advisory=[0.01, 0.1, 1.0, 10.0],
    )
    tokens = meter.create_counter("gen_ai.client.token.usage", unit="{token}")
    for seconds in (0.05, 0.5, 2.0):
        duration.record(seconds, {"gen_ai.operation.name": "chat"})
    tokens.add(120, {"gen_ai.token.type": "input"})
    try:
        assert provider.force_flush(timeout_millis=5000)
    finally:
        provider.shutdown()


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_metrics_arrive_decoded(sink, transport):
    if transport == "grpc":
        exporter = GrpcMetricExporter(endpoint=sink.grpc_endpoint, insecure=True, timeout=5)
    else:
        exporter = HttpMetricExporter(endpoint=f"{sink.http_endpoint}/v1/metrics", timeout=5)
    _export_metrics(exporter)

    metrics = {m["name"]: m for m in sink.wait_for_metrics(2, timeout=5)}
    histogram = metrics["gen_ai.client.operation.duration"]
    assert histogram["type"] == "histogram" and histogram["unit"] == "s"
    (point,) = histogram["data_points"]
    assert point["attributes"] == {"gen_ai.operation.name": "chat"}
    assert point["explicit_bounds"] == [0.01, 0.1, 1.0, 10.0]
    assert point["bucket_counts"] == [0, 1, 1, 1, 0]
    assert point["count"] == 3 and point["sum"] == pytest.approx(2.55)
    assert point["min"] == 0.05 and point["max"] == 2.0
    counter = metrics["gen_ai.client.token.usage"]
    assert counter["type"] == "sum" and counter["is_monotonic"] is True
    assert counter["data_points"][0]["value"] == 120
    assert counter["resource"]["service.name"] == "sink-test"
    assert counter["scope"] == "sink.test.meter"
    assert b"gen_ai.client.token.usage" in sink.raw_bytes()


def _post(url: str, body: bytes, content_type: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read()


def test_otlp_json_with_hex_ids(sink):
    document = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "json"}}]
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "json.scope"},
                        "spans": [
                            {
                                "traceId": "5b8efff798038103d269b633813fc60c",
                                "spanId": "eee19b7ec3c1b174",
                                "parentSpanId": "eee19b7ec3c1b173",
                                "name": "POST /v1/chat/completions",
                                "kind": 3,
                                "startTimeUnixNano": "1544712660000000000",
                                "endTimeUnixNano": "1544712661000000000",
                                "attributes": [
                                    {"key": "replay.step.index", "value": {"intValue": "7"}},
                                    {"key": "replay.code.dirty", "value": {"boolValue": True}},
                                    {
                                        "key": "tags",
                                        "value": {"arrayValue": {"values": [{"stringValue": "a"}]}},
                                    },
                                ],
                                "status": {"code": 1},
                            }
                        ],
                    }
                ],
            }
        ]
    }
    status, body = _post(
        f"{sink.http_endpoint}/v1/traces", json.dumps(document).encode(), "application/json"
    )
    assert status == 200 and json.loads(body) == {}
    (span,) = sink.spans()
    assert span["trace_id"] == "5b8efff798038103d269b633813fc60c"
    assert span["span_id"] == "eee19b7ec3c1b174"
    assert span["parent_span_id"] == "eee19b7ec3c1b173"
    assert span["kind"] == "CLIENT" and span["status"]["code"] == "OK"
    assert span["attributes"] == {"replay.step.index": 7, "replay.code.dirty": True, "tags": ["a"]}
    assert span["start_ns"] == 1544712660000000000
    assert span["resource"] == {"service.name": "json"} and span["scope"] == "json.scope"


def test_bad_requests_get_clear_http_errors(sink):
    base = sink.http_endpoint
    assert _post(f"{base}/v1/logs", b"", "application/x-protobuf")[0] == 404
    assert _post(f"{base}/v1/traces", b"x", "text/plain")[0] == 415
    status, body = _post(f"{base}/v1/traces", b"\xff\xff\xff", "application/x-protobuf")
    assert status == 400 and b"cannot decode" in body
    assert _post(f"{base}/v1/traces", b"{", "application/json")[0] == 400
    assert sink.spans() == []


def test_wait_for_spans_times_out_naming_what_arrived(sink):
    with pytest.raises(TimeoutError, match="received 0 spans"):
        sink.wait_for_spans(1, timeout=0.05)
    _record_agent_step(_span_exporter(sink, "http", gzip=False))
    spans = sink.wait_for_spans(lambda s: any(x["name"] == "invoke_agent demo" for x in s), 5)
    assert len(spans) == 2
    sink.clear()
    assert sink.spans() == [] and sink.raw_bytes() == b""


def test_stop_releases_the_ports():
    with OtlpSink() as first:
        grpc_port = int(first.grpc_endpoint.rsplit(":", 1)[1])
        http_port = int(first.http_endpoint.rsplit(":", 1)[1])
        with pytest.raises(OSError):
            OtlpSink(http_port=http_port).start()
        with pytest.raises(OSError, match="gRPC"):
            OtlpSink(grpc_port=grpc_port).start()
    with OtlpSink(grpc_port=grpc_port, http_port=http_port) as again:
        assert again.http_endpoint == f"http://127.0.0.1:{http_port}"


class _LineReader:
    """Reads a child's stdout line by line with a timeout (no blocking forever in CI)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self._fd = proc.stdout.fileno()
        self._buffer = b""

    def readline(self, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._fd], [], [], remaining)[0]:
                raise TimeoutError(f"no line from the sink; got {self._buffer!r}")
            chunk = os.read(self._fd, 4096)
            if not chunk:
                raise EOFError(f"sink exited; got {self._buffer!r}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()


@pytest.mark.subprocess
def test_command_line_prints_one_line_per_span():
    command = [sys.executable, str(REPO / "examples" / "otlp_sink.py"), "--print"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            lines = _LineReader(proc)
            banner = lines.readline()
            assert banner.startswith("otlp_sink: listening grpc=http://127.0.0.1:")
            http = banner.split("http=", 1)[1].strip()
            exporter = HttpSpanExporter(endpoint=f"{http}/v1/traces", timeout=5)
            _record_agent_step(exporter)
            first, second = lines.readline(), lines.readline()
            assert first.startswith("span 'chat gpt-4o-mini' kind=CLIENT status=ERROR")
            assert "replay.step.index=3" in first and 'replay.run.id="run-1"' in first
            assert second.startswith("span 'invoke_agent demo' kind=INTERNAL")
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert b"stopped after 2 spans" in err


def test_format_span_truncates_long_values():
    span = {
        "name": "x",
        "kind": "CLIENT",
        "status": {"code": "UNSET", "message": ""},
        "attributes": {"url.full": "https://example.test/" + "a" * 200, "replay.step.index": 0},
    }
    line = format_span(span)
    assert line.startswith("span 'x' kind=CLIENT replay.step.index=0 url.full=")
    assert len(line) < 120
