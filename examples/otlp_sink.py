"""A real OTLP receiver on loopback, for tests and the demo.

:class:`OtlpSink` accepts traces and metrics over OTLP/gRPC and OTLP/HTTP (protobuf, optionally
gzip- or deflate-compressed, and OTLP JSON), decodes them with ``opentelemetry-proto`` and keeps
them as plain dicts::

    with OtlpSink() as sink:
        exporter = OTLPSpanExporter(endpoint=sink.grpc_endpoint, insecure=True)
        # or: OTLPSpanExporter(endpoint=f"{sink.http_endpoint}/v1/traces")  (HTTP)
        ...
        spans = sink.wait_for_spans(3, timeout=5)
        assert b"sk-secret" not in sink.raw_bytes()

Run it in the foreground (Ctrl-C to stop) to watch what an application exports::

    python examples/otlp_sink.py --http-port 4318 --grpc-port 4317 --print

It needs only the standard library, ``grpcio`` and ``opentelemetry-proto``.
"""

from __future__ import annotations

import argparse
import base64
import copy
import gzip
import json
import re
import signal
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any, Literal, TypeVar

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

__all__ = ["OtlpSink", "Received", "main"]

Signal = Literal["traces", "metrics"]
Transport = Literal["grpc", "http"]
SpanDict = dict[str, Any]
MetricDict = dict[str, Any]
SpanCallback = Callable[[SpanDict], None]
_M = TypeVar("_M", bound=Message)

# Exporters batch up to 512 spans, and inline bodies can reach tens of KiB each.
_MAX_MESSAGE = 64 * 1024 * 1024


@dataclass(frozen=True)
class Received:
    """One export request as it arrived.

    ``body`` is the serialized payload (protobuf or JSON) after transport decompression: for
    gzip-compressed HTTP or gRPC requests it is the decompressed bytes, so it can be searched.
    """

    transport: Transport
    signal: Signal
    content_type: str
    body: bytes


# --- protobuf -> plain dicts ------------------------------------------------------------------


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, which)


def _attributes(attributes: Iterable[KeyValue]) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in attributes}


def _hex_or_none(raw: bytes) -> str | None:
    return raw.hex() if raw else None


def _enum_name(enum_type: Any, value: int, prefix: str) -> str:
    try:
        full: str = enum_type.Name(value)
    except ValueError:  # proto3 enums are open: an unknown number is kept as is
        return str(value)
    return full[len(prefix) :] if full.startswith(prefix) else full


def _span_dict(
    span: trace_pb2.Span,
    resource: dict[str, Any],
    scope: InstrumentationScope,
    transport: Transport,
) -> SpanDict:
    return {
        "name": span.name,
        "kind": _enum_name(trace_pb2.Span.SpanKind, span.kind, "SPAN_KIND_"),
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_span_id": _hex_or_none(span.parent_span_id),
        "start_ns": span.start_time_unix_nano,
        "end_ns": span.end_time_unix_nano,
        "status": {
            "code": _enum_name(trace_pb2.Status.StatusCode, span.status.code, "STATUS_CODE_"),
            "message": span.status.message,
        },
        "attributes": _attributes(span.attributes),
        "events": [
            {"name": e.name, "time_ns": e.time_unix_nano, "attributes": _attributes(e.attributes)}
            for e in span.events
        ],
        "links": [
            {
                "trace_id": link.trace_id.hex(),
                "span_id": link.span_id.hex(),
                "attributes": _attributes(link.attributes),
            }
            for link in span.links
        ],
        "resource": resource,
        "scope": scope.name,
        "transport": transport,
    }


def spans_of(
    request: trace_service_pb2.ExportTraceServiceRequest, transport: Transport
) -> list[SpanDict]:
    """Flatten an OTLP trace export request into span dicts (see :meth:`OtlpSink.spans`)."""
    out = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                out.append(_span_dict(span, dict(resource), scope_spans.scope, transport))
    return out


def _temporality(value: int) -> str:
    return _enum_name(metrics_pb2.AggregationTemporality, value, "AGGREGATION_TEMPORALITY_")


def _point_base(point: Any) -> dict[str, Any]:
    return {
        "attributes": _attributes(point.attributes),
        "start_ns": point.start_time_unix_nano,
        "time_ns": point.time_unix_nano,
    }


def _number_point(point: metrics_pb2.NumberDataPoint) -> dict[str, Any]:
    which = point.WhichOneof("value")
    return {**_point_base(point), "value": getattr(point, which) if which else None}


def _histogram_point(point: metrics_pb2.HistogramDataPoint) -> dict[str, Any]:
    return {
        **_point_base(point),
        "count": point.count,
        "sum": point.sum if point.HasField("sum") else None,
        "bucket_counts": list(point.bucket_counts),
        "explicit_bounds": list(point.explicit_bounds),
        "min": point.min if point.HasField("min") else None,
        "max": point.max if point.HasField("max") else None,
    }


def _exponential_point(point: metrics_pb2.ExponentialHistogramDataPoint) -> dict[str, Any]:
    return {
        **_point_base(point),
        "count": point.count,
        "sum": point.sum if point.HasField("sum") else None,
        "scale": point.scale,
        "zero_count": point.zero_count,
        "positive": {
            "offset": point.positive.offset,
            "bucket_counts": list(point.positive.bucket_counts),
        },
        "negative": {
            "offset": point.negative.offset,
            "bucket_counts": list(point.negative.bucket_counts),
        },
        "min": point.min if point.HasField("min") else None,
        "max": point.max if point.HasField("max") else None,
    }


def _summary_point(point: metrics_pb2.SummaryDataPoint) -> dict[str, Any]:
    return {
        **_point_base(point),
        "count": point.count,
        "sum": point.sum,
        "quantiles": [{"quantile": q.quantile, "value": q.value} for q in point.quantile_values],
    }


def _metric_dict(metric: metrics_pb2.Metric) -> MetricDict:
    out: MetricDict = {
        "name": metric.name,
        "description": metric.description,
        "unit": metric.unit,
        "type": metric.WhichOneof("data"),
    }
    if metric.HasField("sum"):
        out["is_monotonic"] = metric.sum.is_monotonic
        out["temporality"] = _temporality(metric.sum.aggregation_temporality)
        out["data_points"] = [_number_point(p) for p in metric.sum.data_points]
    elif metric.HasField("gauge"):
        out["data_points"] = [_number_point(p) for p in metric.gauge.data_points]
    elif metric.HasField("histogram"):
        out["temporality"] = _temporality(metric.histogram.aggregation_temporality)
        out["data_points"] = [_histogram_point(p) for p in metric.histogram.data_points]
    elif metric.HasField("exponential_histogram"):
        data = metric.exponential_histogram
        out["temporality"] = _temporality(data.aggregation_temporality)
        out["data_points"] = [_exponential_point(p) for p in data.data_points]
    elif metric.HasField("summary"):
        out["data_points"] = [_summary_point(p) for p in metric.summary.data_points]
    else:
        out["data_points"] = []
    return out


def metrics_of(
    request: metrics_service_pb2.ExportMetricsServiceRequest, transport: Transport
) -> list[MetricDict]:
    """Flatten an OTLP metrics export request into metric dicts (see :meth:`OtlpSink.metrics`)."""
    out = []
    for resource_metrics in request.resource_metrics:
        resource = _attributes(resource_metrics.resource.attributes)
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                item = _metric_dict(metric)
                item.update(
                    resource=dict(resource), scope=scope_metrics.scope.name, transport=transport
                )
                out.append(item)
    return out


# --- OTLP JSON ----------------------------------------------------------------------------------

_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"})
_HEX_ID = re.compile(r"(?:[0-9a-fA-F]{16}){1,2}")


def _ids_to_base64(node: Any) -> None:
    # OTLP JSON writes trace and span ids as hex, where protobuf's JSON mapping expects base64.
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str) and _HEX_ID.fullmatch(value):
                node[key] = base64.b64encode(bytes.fromhex(value)).decode("ascii")
            else:
                _ids_to_base64(value)
    elif isinstance(node, list):
        for item in node:
            _ids_to_base64(item)


def parse_otlp_json(body: bytes, message_type: type[_M]) -> _M:
    """Parse an OTLP JSON export request (hex ids, camelCase or snake_case field names)."""
    document = json.loads(body)
    _ids_to_base64(document)
    message: _M = message_type()
    json_format.ParseDict(document, message, ignore_unknown_fields=True)
    return message


# --- gRPC ---------------------------------------------------------------------------------------


class _TraceServicer(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, sink: OtlpSink) -> None:
        self._sink = sink

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self._sink._add_traces(request, "grpc")
        return trace_service_pb2.ExportTraceServiceResponse()


class _MetricsServicer(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, sink: OtlpSink) -> None:
        self._sink = sink

    def Export(
        self,
        request: metrics_service_pb2.ExportMetricsServiceRequest,
        context: grpc.ServicerContext,
    ) -> metrics_service_pb2.ExportMetricsServiceResponse:
        self._sink._add_metrics(request, "grpc")
        return metrics_service_pb2.ExportMetricsServiceResponse()


def _grpc_handler(
    service: str,
    export: Callable[[Any, grpc.ServicerContext], Message],
    deserialize: Callable[[bytes], Message],
) -> grpc.GenericRpcHandler:
    # Registered by hand rather than with add_*Servicer_to_server so that the deserializer sees
    # the request bytes, which raw_bytes() promises.
    method = grpc.unary_unary_rpc_method_handler(
        export,
        request_deserializer=deserialize,
        response_serializer=lambda message: message.SerializeToString(),
    )
    return grpc.method_handlers_generic_handler(service, {"Export": method})


# --- HTTP ---------------------------------------------------------------------------------------

_HTTP_ROUTES: dict[str, Signal] = {"/v1/traces": "traces", "/v1/metrics": "metrics"}
_PROTOBUF = "application/x-protobuf"
_JSON = "application/json"


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _HttpServer(ThreadingHTTPServer):
    # Handler threads are joined on close; each serves one request (HTTP/1.0), so none lingers.
    daemon_threads = False
    block_on_close = True

    def __init__(self, address: tuple[str, int], sink: OtlpSink) -> None:
        super().__init__(address, _OtlpHttpHandler)
        self.sink = sink


class _OtlpHttpHandler(BaseHTTPRequestHandler):
    server: _HttpServer
    protocol_version = "HTTP/1.0"
    timeout = 10  # an idle or stalled client cannot hold a handler thread (and shutdown) forever

    def do_POST(self) -> None:
        try:
            signal_name = _HTTP_ROUTES.get(self.path.split("?", 1)[0])
            if signal_name is None:
                raise _HttpError(404, f"no OTLP endpoint at {self.path}")
            body = self._decoded_body()
            content_type = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if content_type not in (_PROTOBUF, _JSON):
                raise _HttpError(415, f"unsupported Content-Type {content_type!r}")
            self.server.sink._record_raw("http", signal_name, content_type, body)
            response = self._accept(signal_name, content_type, body)
        except _HttpError as exc:
            self._reply(exc.status, "text/plain; charset=utf-8", str(exc).encode())
            return
        if content_type == _JSON:
            self._reply(200, _JSON, json_format.MessageToJson(response).encode())
        else:
            self._reply(200, _PROTOBUF, response.SerializeToString())

    def _decoded_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raw = self._read_chunked()
        else:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError as exc:
                raise _HttpError(400, "invalid Content-Length") from exc
            raw = self.rfile.read(length)
        encoding = self.headers.get("Content-Encoding", "").strip().lower()
        try:
            if encoding == "gzip":
                return gzip.decompress(raw)
            if encoding == "deflate":
                return zlib.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise _HttpError(400, f"cannot decompress {encoding} body: {exc}") from exc
        if encoding not in ("", "identity"):
            raise _HttpError(415, f"unsupported Content-Encoding {encoding!r}")
        return raw

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()

    def _accept(self, signal_name: Signal, content_type: str, body: bytes) -> Message:
        sink = self.server.sink
        try:
            if signal_name == "traces":
                traces = _parse(body, content_type, trace_service_pb2.ExportTraceServiceRequest)
                sink._add_traces(traces, "http")
                return trace_service_pb2.ExportTraceServiceResponse()
            metrics = _parse(body, content_type, metrics_service_pb2.ExportMetricsServiceRequest)
            sink._add_metrics(metrics, "http")
            return metrics_service_pb2.ExportMetricsServiceResponse()
        except (DecodeError, json_format.ParseError, ValueError) as exc:
            raise _HttpError(400, f"cannot decode OTLP {signal_name}: {exc}") from exc

    def _reply(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests and the demo print what matters themselves


def _from_protobuf(body: bytes, message_type: type[_M]) -> _M:
    message: _M = message_type()
    message.ParseFromString(body)
    return message


def _parse(body: bytes, content_type: str, message_type: type[_M]) -> _M:
    if content_type == _JSON:
        return parse_otlp_json(body, message_type)
    return _from_protobuf(body, message_type)


def _at_least(count: int) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda items: len(items) >= count


# --- the sink -----------------------------------------------------------------------------------


class OtlpSink:
    """An OTLP/gRPC + OTLP/HTTP receiver on loopback that keeps everything it receives.

    Use it as a context manager (or call :meth:`start` and :meth:`stop`). Ports default to 0,
    meaning free ones chosen by the system. All methods are thread-safe; results are copies.

    ``on_span`` is called once per received span (in a receiver thread) with its dict.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        grpc_port: int = 0,
        http_port: int = 0,
        on_span: SpanCallback | None = None,
    ) -> None:
        self._host = host
        self._requested = (grpc_port, http_port)
        self._on_span = on_span
        self._cond = threading.Condition(threading.RLock())
        self._spans: list[SpanDict] = []
        self._metrics: list[MetricDict] = []
        self._received: list[Received] = []
        self._grpc_server: grpc.Server | None = None
        self._grpc_pool: futures.ThreadPoolExecutor | None = None
        self._http_server: _HttpServer | None = None
        self._http_thread: threading.Thread | None = None
        self._grpc_port = 0
        self._http_port = 0

    # lifecycle

    def start(self) -> OtlpSink:
        """Bind both ports and start serving; returns ``self``."""
        if self._grpc_server is not None:
            return self
        try:
            self._start_grpc()
            self._start_http()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_grpc(self) -> None:
        self._grpc_pool = futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="otlp-grpc")
        server = grpc.server(
            self._grpc_pool,
            options=[
                # Without this, a second server could silently share a fixed port.
                ("grpc.so_reuseport", 0),
                ("grpc.max_receive_message_length", _MAX_MESSAGE),
            ],
        )
        self._grpc_server = server
        traces = _TraceServicer(self)
        metrics = _MetricsServicer(self)
        server.add_generic_rpc_handlers(
            (
                _grpc_handler(
                    "opentelemetry.proto.collector.trace.v1.TraceService",
                    traces.Export,
                    self._grpc_deserializer("traces", trace_service_pb2.ExportTraceServiceRequest),
                ),
                _grpc_handler(
                    "opentelemetry.proto.collector.metrics.v1.MetricsService",
                    metrics.Export,
                    self._grpc_deserializer(
                        "metrics", metrics_service_pb2.ExportMetricsServiceRequest
                    ),
                ),
            )
        )
        address = f"{self._host}:{self._requested[0]}"
        try:
            port = server.add_insecure_port(address)
        except RuntimeError as exc:
            raise OSError(f"OTLP sink cannot bind gRPC to {address}: {exc}") from exc
        if port == 0:
            raise OSError(f"OTLP sink cannot bind gRPC to {address}")
        self._grpc_port = port
        server.start()

    def _start_http(self) -> None:
        self._http_server = _HttpServer((self._host, self._requested[1]), self)
        self._http_port = self._http_server.server_address[1]
        self._http_thread = threading.Thread(
            target=self._http_server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="otlp-http",
            daemon=True,
        )
        self._http_thread.start()

    def stop(self) -> None:
        """Stop both servers and release their ports and threads. Safe to call twice."""
        if self._http_server is not None:
            if self._http_thread is not None:
                self._http_server.shutdown()
                self._http_thread.join()
            self._http_server.server_close()
            self._http_server = self._http_thread = None
        if self._grpc_server is not None:
            self._grpc_server.stop(grace=None).wait()
            self._grpc_server = None
        if self._grpc_pool is not None:
            self._grpc_pool.shutdown(wait=True)
            self._grpc_pool = None

    def __enter__(self) -> OtlpSink:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # endpoints

    @property
    def grpc_endpoint(self) -> str:
        """``http://HOST:PORT`` for ``OTLPSpanExporter(endpoint=..., insecure=True)`` (gRPC)."""
        return f"http://{self._host}:{self._grpc_port}"

    @property
    def http_endpoint(self) -> str:
        """``http://HOST:PORT``; exporters post to it plus ``/v1/traces`` or ``/v1/metrics``."""
        return f"http://{self._host}:{self._http_port}"

    # what was received

    def spans(self) -> list[SpanDict]:
        """Every span received so far, in arrival order, as plain dicts.

        Keys: ``name``; ``kind`` (``"INTERNAL"``, ``"SERVER"``, ``"CLIENT"``, ``"PRODUCER"``,
        ``"CONSUMER"`` or ``"UNSPECIFIED"``); ``trace_id``, ``span_id`` (hex);
        ``parent_span_id`` (hex, or None for a root); ``start_ns``, ``end_ns``; ``status``
        (``{"code": "UNSET"|"OK"|"ERROR", "message"}``); ``attributes`` (key -> str, int,
        float, bool, bytes, list or dict); ``events`` (``[{"name", "time_ns", "attributes"}]``);
        ``links``; ``resource`` (its attributes); ``scope`` (instrumentation scope name);
        ``transport`` (``"grpc"`` or ``"http"``).
        """
        with self._cond:
            return copy.deepcopy(self._spans)

    def metrics(self) -> list[MetricDict]:
        """Every metric received so far (one dict per metric per export), in arrival order.

        Keys: ``name``, ``description``, ``unit``, ``type`` (``"sum"``, ``"gauge"``,
        ``"histogram"``, ``"exponential_histogram"`` or ``"summary"``), ``data_points``,
        ``resource``, ``scope``, ``transport``; sums add ``is_monotonic`` and ``temporality``,
        histograms ``temporality``. Every data point has ``attributes``, ``start_ns`` and
        ``time_ns``; sum and gauge points add ``value``; histogram points add ``count``,
        ``sum``, ``bucket_counts``, ``explicit_bounds`` (the bucket boundaries), ``min``, ``max``.
        """
        with self._cond:
            return copy.deepcopy(self._metrics)

    def requests(self) -> list[Received]:
        """Every export request received so far, with its transport, signal and body."""
        with self._cond:
            return list(self._received)

    def raw_bytes(self) -> bytes:
        """Every request body received, concatenated: ``b"secret" in sink.raw_bytes()``.

        Bodies are the serialized OTLP payloads after transport decompression (see
        :class:`Received`), so a value exported in an attribute appears here verbatim.
        """
        with self._cond:
            return b"".join(r.body for r in self._received)

    def clear(self) -> None:
        """Forget everything received so far."""
        with self._cond:
            self._spans.clear()
            self._metrics.clear()
            self._received.clear()

    def wait_for_spans(
        self,
        predicate_or_count: int | Callable[[list[SpanDict]], bool],
        timeout: float = 10.0,
    ) -> list[SpanDict]:
        """Wait until at least N spans arrived, or ``predicate(spans)`` is true; return spans.

        The predicate receives the list of all spans received so far. Raises
        :class:`TimeoutError` naming what did arrive when ``timeout`` seconds pass first.
        """
        return self._wait(self._spans, predicate_or_count, timeout, "spans")

    def wait_for_metrics(
        self,
        predicate_or_count: int | Callable[[list[MetricDict]], bool],
        timeout: float = 10.0,
    ) -> list[MetricDict]:
        """Like :meth:`wait_for_spans`, for metric dicts."""
        return self._wait(self._metrics, predicate_or_count, timeout, "metrics")

    def _wait(
        self,
        items: list[dict[str, Any]],
        predicate_or_count: int | Callable[[list[dict[str, Any]]], bool],
        timeout: float,
        what: str,
    ) -> list[dict[str, Any]]:
        done = (
            _at_least(predicate_or_count)
            if isinstance(predicate_or_count, int)
            else predicate_or_count
        )
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                current = copy.deepcopy(items)
                if done(current):
                    return current
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    names = ", ".join(repr(i["name"]) for i in current) or "none"
                    raise TimeoutError(
                        f"OTLP sink: condition on {what} not met after {timeout}s; "
                        f"received {len(current)} {what}: {names}"
                    )
                self._cond.wait(remaining)

    # receiving (called from server threads)

    def _grpc_deserializer(
        self, signal_name: Signal, message_type: type[_M]
    ) -> Callable[[bytes], _M]:
        def deserialize(data: bytes) -> _M:
            self._record_raw("grpc", signal_name, "application/grpc", data)
            return _from_protobuf(data, message_type)

        return deserialize

    def _record_raw(
        self, transport: Transport, signal_name: Signal, content_type: str, body: bytes
    ) -> None:
        with self._cond:
            self._received.append(Received(transport, signal_name, content_type, bytes(body)))

    def _add_traces(
        self, request: trace_service_pb2.ExportTraceServiceRequest, transport: Transport
    ) -> None:
        new = spans_of(request, transport)
        with self._cond:
            self._spans.extend(new)
            self._cond.notify_all()
        if self._on_span is not None:
            for span in new:
                try:
                    self._on_span(copy.deepcopy(span))
                except Exception as exc:
                    # Failing the export would make the exporter retry and duplicate spans.
                    print(f"otlp_sink: on_span callback failed: {exc!r}", file=sys.stderr)

    def _add_metrics(
        self, request: metrics_service_pb2.ExportMetricsServiceRequest, transport: Transport
    ) -> None:
        new = metrics_of(request, transport)
        with self._cond:
            self._metrics.extend(new)
            self._cond.notify_all()


# --- command line -------------------------------------------------------------------------------

_KEY_ATTRIBUTES = (
    "replay.run.id",
    "replay.step.index",
    "replay.step.kind",
    "replay.mode",
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.response.finish_reasons",
    "http.request.method",
    "url.full",
    "server.address",
    "http.response.status_code",
    "replay.response.complete",
    "error.type",
)


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return json.dumps(text, ensure_ascii=False) if isinstance(value, str) else text


def format_span(span: Mapping[str, Any]) -> str:
    """One line for a span: its name, kind, status and its key replay/GenAI/HTTP attributes."""
    attributes = span["attributes"]
    parts = [f"span {span['name']!r}", f"kind={span['kind']}"]
    if span["status"]["code"] != "UNSET":
        parts.append(f"status={span['status']['code']}")
    parts += [f"{k}={_short(attributes[k])}" for k in _KEY_ATTRIBUTES if k in attributes]
    return " ".join(parts)


def main(argv: list[str] | None = None) -> int:
    """Run a sink in the foreground until interrupted."""
    parser = argparse.ArgumentParser(
        description="Receive OTLP traces and metrics (gRPC and HTTP) on loopback."
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    parser.add_argument("--http-port", type=int, default=0, help="OTLP/HTTP port (0: any free)")
    parser.add_argument("--grpc-port", type=int, default=0, help="OTLP/gRPC port (0: any free)")
    parser.add_argument("--print", action="store_true", help="print one line per received span")
    args = parser.parse_args(argv)

    print_lock = threading.Lock()

    def show(span: SpanDict) -> None:
        with print_lock:
            print(format_span(span), flush=True)

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    sink = OtlpSink(
        host=args.host,
        grpc_port=args.grpc_port,
        http_port=args.http_port,
        on_span=show if args.print else None,
    )
    try:
        sink.start()
    except OSError as exc:
        print(f"otlp_sink: {exc}", file=sys.stderr)
        return 2
    with sink:
        print(
            f"otlp_sink: listening grpc={sink.grpc_endpoint} http={sink.http_endpoint}",
            flush=True,
        )
        stop.wait()
        count = len(sink.spans())
    print(f"otlp_sink: stopped after {count} spans", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
