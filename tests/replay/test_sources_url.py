"""Runs fetched from an HTTP endpoint answering OTLP JSON, as Jaeger v2's query API does."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typing_extensions import Self

from otel_replay.errors import SourceError
from otel_replay.replay.sources import fetch, load_run, read_runs
from tests.replay.conftest import (
    CLAUDE,
    SUPPORT,
    Recorded,
    assert_matches_wire,
    closed_port,
    collector_json,
    one_span_per_line,
    protobuf_json,
    run_spans,
)


class _Loopback:
    """A server on loopback, serving in a thread of its own from ``with`` to its end."""

    server: ThreadingHTTPServer

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


class Jaeger(_Loopback):
    """A tiny stand-in for Jaeger v2's ``/api/v3/traces/{trace_id}`` on loopback."""

    def __init__(self, traces: dict[str, dict[str, Any]]) -> None:
        self.traces = traces
        self.requests: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests.append(self.path)
                trace_id = self.path.removeprefix("/api/v3/traces/")
                if trace_id == "ui":  # the web UI's page, where a user copied the wrong link
                    page = b"<!doctype html><html><body>Jaeger UI</body></html>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                elif trace_id in owner.traces:
                    self._send(200, {"result": owner.traces[trace_id]})
                else:
                    self._send(404, {"error": {"httpCode": 404, "message": "trace not found"}})

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._serve(Handler)

    def url(self, trace_id: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/api/v3/traces/{trace_id}"


def trace_id_of(recorded: Recorded, run_id: str) -> str:
    context = run_spans(recorded, run_id)[0].context
    assert context is not None
    return f"{context.trace_id:032x}"


@pytest.fixture
def jaeger(recorded: Recorded) -> Iterator[Jaeger]:
    traces = {
        trace_id_of(recorded, SUPPORT): protobuf_json(run_spans(recorded, SUPPORT)),
        trace_id_of(recorded, CLAUDE): collector_json(run_spans(recorded, CLAUDE)),
    }
    with Jaeger(traces) as server:
        yield server


def test_run_from_a_jaeger_url(recorded: Recorded, jaeger: Jaeger) -> None:
    for run_id in (SUPPORT, CLAUDE):
        url = jaeger.url(trace_id_of(recorded, run_id))
        run = load_run(url)
        assert run.run_id == run_id and run.source == url
        assert_matches_wire(run, recorded)


def test_selector_is_not_sent(recorded: Recorded, jaeger: Jaeger) -> None:
    trace_id = trace_id_of(recorded, CLAUDE)
    assert load_run(f"{jaeger.url(trace_id)}#{CLAUDE}").run_id == CLAUDE
    assert jaeger.requests == [f"/api/v3/traces/{trace_id}"]


def test_fetch_once_then_read_the_bytes(recorded: Recorded, jaeger: Jaeger) -> None:
    url = jaeger.url(trace_id_of(recorded, CLAUDE))
    (loaded,) = read_runs(fetch(url), url)
    assert_matches_wire(loaded.run, recorded)
    assert len(jaeger.requests) == 1


def test_an_error_answer_names_the_url(jaeger: Jaeger) -> None:
    url = jaeger.url("0" * 32)
    with pytest.raises(SourceError) as caught:
        load_run(url)
    # The server's own words come after the status.
    assert str(caught.value) == f"{url}: the server answered HTTP 404 Not Found (trace not found)"


def test_a_web_page_is_named_as_one(jaeger: Jaeger, tmp_path: Path) -> None:
    url = jaeger.url("ui")
    with pytest.raises(SourceError) as caught:
        load_run(url)
    assert str(caught.value) == f"{url}: an HTML or XML document, not OTLP trace data"
    saved = tmp_path / "trace.json"  # the same page saved as a file
    saved.write_bytes(b"\n  <html><body>Sign in</body></html>\n")
    with pytest.raises(SourceError) as caught:
        load_run(str(saved))
    assert str(caught.value) == f"{saved}: an HTML or XML document, not OTLP trace data"


def test_an_unreachable_server_names_the_url() -> None:
    url = f"http://127.0.0.1:{closed_port()}/api/v3/traces/abc"
    with pytest.raises(SourceError) as caught:
        load_run(url)
    message = str(caught.value)
    assert message.startswith(f"{url}: cannot download") and "\n" not in message


@pytest.mark.parametrize("url", ["http://[::1/x", "http://a b/x"], ids=["ipv6", "space"])
def test_a_malformed_url_names_the_url(url: str) -> None:
    with pytest.raises(SourceError) as caught:
        fetch(url)
    message = str(caught.value)
    assert message.startswith(f"{url}: cannot download (") and "\n" not in message


@pytest.mark.parametrize(
    "url",
    [
        "http://ann:pw-source-4455@127.0.0.1:{port}/api/traces/abc?token=tk-source-8899",
        "http://ann:pw-source-4455@127.0.0.1:{port}x/api/traces/abc?token=tk-source-8899",
    ],
    ids=["unreachable", "bad-port"],
)
def test_credentials_in_a_source_url_never_reach_the_message(url: str) -> None:
    url = url.format(port=closed_port())
    with pytest.raises(SourceError) as caught:
        load_run(url)
    message = str(caught.value)
    assert message.startswith("http://REDACTED:REDACTED@127.0.0.1:")
    assert "cannot download" in message and "token=REDACTED" in message
    assert "pw-source-4455" not in message and "tk-source-8899" not in message


def test_credentials_in_the_url_of_a_live_server_stay_out_of_the_message(jaeger: Jaeger) -> None:
    url = jaeger.url("0" * 32).replace("http://", "http://ann:pw-source-4455@") + "?key=k-7788-k"
    with pytest.raises(SourceError) as caught:
        load_run(url)
    message = str(caught.value)
    assert message.startswith("http://REDACTED:REDACTED@127.0.0.1:") and "key=REDACTED" in message
    assert "pw-source-4455" not in message and "k-7788-k" not in message


def test_a_file_url_is_the_file_it_names(recorded: Recorded, tmp_path: Path) -> None:
    path = tmp_path / "a trace.json"
    path.write_text(json.dumps(collector_json(run_spans(recorded, CLAUDE))))
    url = path.as_uri()  # file:///…/a%20trace.json
    assert load_run(url).run_id == CLAUDE
    assert load_run(f"{url}#{CLAUDE}").run_id == CLAUDE
    assert load_run(url.replace("file://", "file://localhost")).run_id == CLAUDE
    for bad, message in [
        (f"{url}#r_nope", f"{path} has no run 'r_nope'"),
        ((tmp_path / "gone.json").as_uri(), f"no such file: {tmp_path / 'gone.json'}"),
        ("file://elsewhere/trace.json", "file://elsewhere/trace.json: a file URL on another host"),
        ("file://", "file://: a file URL that names no file"),
    ]:
        with pytest.raises(SourceError) as caught:
            load_run(bad)
        assert str(caught.value).startswith(message)


class Answers(_Loopback):
    """A loopback server answering each path as ``routes`` says: ``(status, headers,
    body)``; it keeps the headers of every request it gets."""

    def __init__(self, routes: dict[str, tuple[int, dict[str, str], bytes]]) -> None:
        self.routes = routes
        self.seen: list[tuple[str, dict[str, str]]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.seen.append((self.path, dict(self.headers.items())))
                status, headers, body = owner.routes[self.path]
                self.send_response(status)
                for name, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)
                self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._serve(Handler)
        self.base = f"127.0.0.1:{self.server.server_address[1]}"


def test_user_info_in_a_url_is_sent_as_basic_credentials(recorded: Recorded) -> None:
    trace = json.dumps(collector_json(run_spans(recorded, CLAUDE))).encode()
    with Answers({"/trace.json": (200, {}, trace)}) as server:
        run = load_run(f"http://ann:pw%40source-4455@{server.base}/trace.json")
        ((path, headers),) = server.seen
    assert run.run_id == CLAUDE
    assert path == "/trace.json" and headers["Host"] == server.base
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"ann:pw@source-4455").decode()


def test_credentials_do_not_follow_a_redirect_to_another_host(recorded: Recorded) -> None:
    trace = json.dumps(collector_json(run_spans(recorded, CLAUDE))).encode()
    with Answers({"/trace.json": (200, {}, trace)}) as other:
        moved = {"Location": f"http://{other.base}/trace.json"}
        with Answers({"/old.json?token=tk-99887766": (302, moved, b"")}) as first:
            run = load_run(f"http://ann:pw-source-4455@{first.base}/old.json?token=tk-99887766")
            assert "Authorization" in first.seen[0][1]
    assert run.run_id == CLAUDE
    ((_, headers),) = other.seen
    assert "Authorization" not in headers


def test_an_answer_cut_short_is_an_error_not_a_smaller_run(recorded: Recorded) -> None:
    lines = one_span_per_line(run_spans(recorded, SUPPORT), collector_json)
    whole = len(lines)
    cut = lines[: lines.index(b"\n", whole // 2) + 1]  # ends on a line: still valid JSON lines
    with Answers({"/traces.jsonl": (200, {"Content-Length": str(whole)}, cut)}) as server:
        url = f"http://{server.base}/traces.jsonl"
        with pytest.raises(SourceError) as caught:
            load_run(url)
    assert str(caught.value) == f"{url}: the answer was cut short after {len(cut)} bytes of {whole}"
