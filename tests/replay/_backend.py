"""A loopback HTTP server standing in for Jaeger v2, Tempo and Phoenix: fixed answers by path
(:meth:`Backend.serve`), and, past those, a :class:`Traces` store that answers the trace and
search APIs the way each documents them.

Sources of the answers' shapes (the servers cannot be installed here):

* Jaeger v2, query API v3 (``proto/api_v3/query_service.proto`` in jaegertracing/jaeger-idl;
  its HTTP gateway ``cmd/jaeger/internal/extension/jaegerquery/internal/apiv3/
  http_gateway.go`` and ``query_parser.go`` in jaegertracing/jaeger, v2.19 to v2.20):
  ``GET /api/v3/traces/{id}`` and ``GET /api/v3/traces?query.…`` answer OTLP JSON (hex ids,
  enums as numbers) in ``{"result": …}``, found nothing as HTTP 404 with
  ``{"error": {"httpCode": 404, "message": "No traces found"}}``; the search requires its
  time range (HTTP 400 otherwise), takes ``query.attributes`` as a JSON object of strings
  (ignored before v2.19) and, on the storages that need it, a service; ``GET
  /api/v3/services`` answers ``{"services": […]}``, ``{}`` when there is none (jsonpb leaves
  empty lists out).
* Tempo (``pkg/api/http.go``, ``pkg/tempopb/tempo.proto``,
  ``modules/frontend/search_sharder.go`` in grafana/tempo;
  https://grafana.com/docs/tempo/latest/api_docs/): ``GET /api/v2/traces/{id}`` answers the
  protobuf JSON mapping (base64 ids, enum names) in ``{"trace": {"resourceSpans": …}}``;
  ``GET /api/search?q=…&start=…&end=…&limit=…&spss=…`` answers ``{"traces":
  [TraceSearchMetadata…], "metrics": {…}}``, trace ids in hex without their leading zeros,
  uint64 values as strings; a range over ``max_search_duration`` (168 h unless told) is HTTP
  400 with a plain-text reason.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

NOT_FOUND = {"error": {"httpCode": 404, "message": "trace not found"}}


@dataclass
class Answer:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def answer(document: Any, status: int = 200, delay: float = 0.0, **headers: str) -> Answer:
    body = document if isinstance(document, bytes) else json.dumps(document).encode()
    return Answer(status, body, headers, delay)


class Backend:
    """A loopback HTTP server answering each path (with its query, else without) as
    :attr:`routes` says, else as :attr:`traces` does, logging each request's path and Accept
    header; a path neither knows is Jaeger's 404."""

    def __init__(self) -> None:
        self.routes: dict[str, Answer] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.headers: list[dict[str, str]] = []
        self.sizes: list[int] = []
        """The size of each answer's body."""
        self.traces = Traces()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests.append((self.path, self.headers.get("Accept")))
                owner.headers.append(dict(self.headers))
                found = owner.routes.get(self.path) or owner.routes.get(self.path.partition("?")[0])
                found = found or owner.traces.answer(self.path) or answer(NOT_FOUND, 404)
                owner.sizes.append(len(found.body))
                time.sleep(found.delay)
                with contextlib.suppress(OSError):  # the client gave up waiting
                    self.send_response(found.status)
                    headers = {"Content-Type": "application/json", **found.headers}
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(found.body)))
                    self.end_headers()
                    self.wfile.write(found.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def serve(
        self, path: str, document: Any, status: int = 200, delay: float = 0.0, **headers: str
    ) -> None:
        self.routes[path] = answer(document, status, delay, **headers)

    def reset(self) -> None:
        self.routes.clear()
        self.requests.clear()
        self.headers.clear()
        self.sizes.clear()
        self.traces = Traces()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


class Traces:
    """Traces kept as Jaeger answers them (OTLP JSON resourceSpans, hex ids), answering
    Jaeger's and Tempo's trace and search APIs."""

    def __init__(self) -> None:
        self.resource_spans: list[dict[str, Any]] = []
        self.jaeger_filters = True
        """False: the search ignores query.attributes, as Jaeger before v2.19 did."""
        self.tempo_max_search_s = 168 * 3600
        self.delay = 0.0
        self._routes: list[tuple[re.Pattern[str], Callable[..., Answer]]] = [
            (re.compile(r"/api/v3/traces/([0-9a-f]{32})"), self._jaeger_trace),
            (re.compile(r"/api/v3/traces"), self._jaeger_search),
            (re.compile(r"/api/v3/services"), self._jaeger_services),
            (re.compile(r"/api/v2/traces/([0-9a-f]{32})"), self._tempo_trace),
            (re.compile(r"/api/search"), self._tempo_search),
        ]

    def add(self, resource_spans: dict[str, Any]) -> None:
        """Keep one resourceSpans entry (OTLP JSON, hex ids)."""
        self.resource_spans.append(resource_spans)

    def answer(self, path: str) -> Answer | None:
        parts = urlsplit(path)
        query = {key: values[0] for key, values in parse_qs(parts.query).items()}
        for pattern, handler in self._routes:
            matched = pattern.fullmatch(parts.path)
            if matched:
                found: Answer = handler(query, *matched.groups())
                found.delay = self.delay
                return found
        return None

    # -- what the traces hold ------------------------------------------------------------------

    def _spans(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(resource, span) of every span kept."""
        return [
            (entry["resource"], span)
            for entry in self.resource_spans
            for scope in entry["scopeSpans"]
            for span in scope["spans"]
        ]

    def _trace_ids(self) -> list[str]:
        return list(dict.fromkeys(span["traceId"] for _, span in self._spans()))

    def _trace(self, trace_id: str) -> list[dict[str, Any]]:
        """The resourceSpans entries of one trace, holding only its spans."""
        out = []
        for entry in self.resource_spans:
            scopes = [
                {**scope, "spans": [s for s in scope["spans"] if s["traceId"] == trace_id]}
                for scope in entry["scopeSpans"]
            ]
            scopes = [scope for scope in scopes if scope["spans"]]
            if scopes:
                out.append({**entry, "scopeSpans": scopes})
        return out

    def _matches(
        self, trace_id: str, start_ns: int, end_ns: int, where: Callable[..., bool]
    ) -> bool:
        return any(
            span["traceId"] == trace_id
            and start_ns <= int(span["startTimeUnixNano"]) <= end_ns
            and where(resource, span)
            for resource, span in self._spans()
        )

    # -- Jaeger --------------------------------------------------------------------------------

    def _jaeger_trace(self, query: dict[str, str], trace_id: str) -> Answer:
        found = self._trace(trace_id)
        if not found:
            return answer(NOT_FOUND, 404)
        return answer({"result": {"resourceSpans": found}})

    def _jaeger_services(self, query: dict[str, str]) -> Answer:
        services = sorted({_service(resource) for resource, _ in self._spans()})
        return answer({"services": services} if services else {})

    def _jaeger_search(self, query: dict[str, str]) -> Answer:
        def param(canonical: str, deprecated: str) -> str:
            return query.get(canonical) or query.get(deprecated, "")

        low = param("query.startTimeMin", "query.start_time_min")
        high = param("query.startTimeMax", "query.start_time_max")
        if not low or not high:
            message = "query.startTimeMin and query.startTimeMax are required"
            return answer({"error": {"httpCode": 400, "message": message}}, 400)
        service = param("query.serviceName", "query.service_name")
        if not service:  # Badger, Cassandra and others need one
            return answer({"error": {"httpCode": 500, "message": "service name must be set"}}, 500)
        wanted = json.loads(query.get("query.attributes", "{}")) if self.jaeger_filters else {}
        depth = int(param("query.searchDepth", "query.num_traces") or 100)

        def matches(resource: dict[str, Any], span: dict[str, Any]) -> bool:
            values = _attributes(span)
            return _service(resource) == service and all(
                values.get(key) == value for key, value in wanted.items()
            )

        window = (_ns(low), _ns(high))
        found = [t for t in self._trace_ids() if self._matches(t, *window, matches)][:depth]
        if not found:
            return answer({"error": {"httpCode": 404, "message": "No traces found"}}, 404)
        return answer({"result": {"resourceSpans": [e for t in found for e in self._trace(t)]}})

    # -- Tempo ---------------------------------------------------------------------------------

    def _tempo_trace(self, query: dict[str, str], trace_id: str) -> Answer:
        found = self._trace(trace_id)
        if not found:
            return answer(b"trace not found", 404, **{"Content-Type": "text/plain"})
        return answer({"trace": {"resourceSpans": _protobuf_json(found)}, "metrics": {}})

    def _tempo_search(self, query: dict[str, str]) -> Answer:
        start, end = int(query["start"]), int(query["end"])
        if end - start > self.tempo_max_search_s:
            hours = self.tempo_max_search_s // 3600
            reason = (
                f"range specified by start and end exceeds {hours}h0m0s. "
                f"received start={start} end={end}"
            )
            return answer(reason.encode(), 400, **{"Content-Type": "text/plain"})
        parsed = re.fullmatch(r"\{ span\.([\w.]+) = (\".*\") \}", query["q"])
        assert parsed, query["q"]  # the only TraceQL otel-replay sends
        key, value = parsed[1], json.loads(parsed[2])

        def matches(resource: dict[str, Any], span: dict[str, Any]) -> bool:
            return _attributes(span).get(key) == value

        window = (start * 10**9, end * 10**9)
        found = [t for t in self._trace_ids() if self._matches(t, *window, matches)]
        traces = [self._metadata(t) for t in found[: int(query.get("limit", 20))]]
        metrics = {"inspectedTraces": len(self._trace_ids()), "inspectedBytes": "48213"}
        return answer(
            {"traces": traces, "metrics": {**metrics, "completedJobs": 1, "totalJobs": 1}}
        )

    def _metadata(self, trace_id: str) -> dict[str, Any]:
        spans = [(r, s) for r, s in self._spans() if s["traceId"] == trace_id]
        root_resource, root = min(spans, key=lambda pair: int(pair[1]["startTimeUnixNano"]))
        start = int(root["startTimeUnixNano"])
        end = max(int(s["endTimeUnixNano"]) for _, s in spans)
        return {
            "traceID": trace_id.lstrip("0"),
            "rootServiceName": _service(root_resource),
            "rootTraceName": root["name"],
            "startTimeUnixNano": str(start),
            "durationMs": (end - start) // 10**6,
            "spanSets": [
                {
                    "spans": [
                        {
                            "spanID": root["spanId"],
                            "startTimeUnixNano": str(start),
                            "durationNanos": str(int(root["endTimeUnixNano"]) - start),
                        }
                    ],
                    "matched": len(spans),
                }
            ],
        }


def _service(resource: dict[str, Any]) -> str:
    for attribute in resource.get("attributes", []):
        if attribute["key"] == "service.name":
            return str(attribute["value"]["stringValue"])
    return "unknown_service"


def _attributes(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}


def _ns(rfc3339: str) -> int:
    return int(datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()) * 10**9


def _protobuf_json(resource_spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OTLP JSON with hex ids and enum numbers as the protobuf JSON mapping writes it."""
    kinds = ["SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT"]
    codes = ["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"]
    out = copy.deepcopy(resource_spans)
    for entry in out:
        for scope in entry["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
                if isinstance(span.get("kind"), int):
                    span["kind"] = kinds[span["kind"]]
                status = span.get("status", {})
                if isinstance(status.get("code"), int):
                    status["code"] = codes[status["code"]]
    return out
