"""The stand-in's HTTP server: routing, recording, special models and streaming on the wire.

Routes (matched by path suffix, so any prefix such as `/v1` works):
- `POST …/chat/completions`, `POST …/responses` (OpenAI), `POST …/messages` (Anthropic);
- `/tools/…`: the toy tool backend (see `tools.py`);
- the telemetry sinks of SDKs, so agents that upload their traces can run against it:
  `POST …/v1/traces/ingest` (OpenAI Agents SDK) -> 204; LangSmith's `GET …/info` -> its
  configuration, `POST …/runs/multipart`, `…/runs/batch` -> 202;
- `GET /_standin/requests` (recorded requests as JSON, bodies base64), `DELETE` the same path
  to clear them, `GET /_standin/health`. Requests to `/_standin/` are not recorded.

Special models: `standin-error` -> HTTP 429 in the provider's error format; `standin-cut` -> the
answer is cut off: a stream stops after a few events, a JSON body halfway, and the connection is
dropped without the terminating chunk; `standin-slow` -> 2 s before the response headers;
`standin-flaky` -> HTTP 429 to the first request of each distinct body, then the answer, so an
SDK that retries sees a rate limit and then succeeds; `standin-triage` -> a call of the first
offered `transfer_to_*` tool (an OpenAI Agents SDK handoff) rather than of the other tools.
A request header `x-standin-fail-first: N` (any model) answers 429 to the first N requests of
each distinct body the same way; with `x-standin-fail-status: CODE` they get that status instead
(`503`: the provider's server error). Both headers work on `/tools/` too, counted per method,
path, query and body, answered in the tool backend's error format.
A request body's integer `seed` (any protocol) makes the phrasing deterministic.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from . import _brain, anthropic_messages, openai_chat, openai_responses, tools
from ._wire import JsonReply, Reply, SseReply, json_reply
from .recording import RecordedRequest, Recorder

SLOW_SECONDS = 2.0
SERVER_ERROR = "The server had an error while processing your request. Sorry about that!"
RETRY_SOON = ("retry-after-ms", "20")  # an SDK retrying a refused call waits no longer
CUT_AFTER_EVENTS = 3
FAIL_FIRST_HEADER = "x-standin-fail-first"
FAIL_STATUS_HEADER = "x-standin-fail-status"


@dataclass(frozen=True)
class _Endpoint:
    handle: Callable[[dict[str, Any], random.Random, _brain.PromptCache], Reply]
    error: Callable[[int, str, str], JsonReply]
    rate_limited: Callable[[str], JsonReply]
    server_error: str = "server_error"  # the error type of a 5xx in the provider's format


_ENDPOINTS = {
    "/chat/completions": _Endpoint(openai_chat.handle, openai_chat.error, openai_chat.rate_limited),
    "/responses": _Endpoint(
        openai_responses.handle, openai_responses.error, openai_responses.rate_limited
    ),
    "/messages": _Endpoint(
        anthropic_messages.handle,
        anthropic_messages.error,
        anthropic_messages.rate_limited,
        "api_error",
    ),
}


# Where SDKs upload their own telemetry: accepted and dropped.
_SINKS = {
    "/v1/traces/ingest": JsonReply(204, b""),
    "/info": json_reply(
        200, {"version": "standin", "instance_flags": {"zstd_compression_enabled": True}}
    ),
    "/runs/multipart": json_reply(202, {}),
    "/runs/batch": json_reply(202, {}),
}


class StandIn:
    """A local model provider and tool backend on a background daemon thread.

    `with StandIn() as s:` starts it on a free port (or `port`) and stops it on exit, closing
    every connection. `event_delay` is the pause between SSE events in seconds (0 allowed).
    Point OpenAI clients at `s.openai_base_url`, Anthropic clients at `s.base_url`, tools at
    `s.tools_url`. `s.received` is a snapshot list of `RecordedRequest`.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        event_delay: float = 0.005,
        *,
        verbose: bool = False,
    ) -> None:
        self.host, self._requested_port = host, port
        self.event_delay, self.verbose = event_delay, verbose
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> StandIn:
        if self._server is not None:
            raise RuntimeError("StandIn already started")
        server = _Server((self.host, self._requested_port), self.event_delay, self.verbose)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), name="standin", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close every open connection; safe to call twice."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.stopping.set()
        server.shutdown()
        server.drop_connections()
        server.server_close()
        thread.join()
        self._server = self._thread = None

    def __enter__(self) -> StandIn:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return int(self._running().server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url

    @property
    def tools_url(self) -> str:
        return f"{self.base_url}/tools"

    @property
    def received(self) -> list[RecordedRequest]:
        return self._running().recorder.snapshot()

    def clear(self) -> None:
        """Forget the recorded requests."""
        self._running().recorder.clear()

    def _running(self) -> _Server:
        if self._server is None:
            raise RuntimeError("StandIn is not running: use `with StandIn() as s:` or .start()")
        return self._server


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # tests open 50 connections at once

    def __init__(self, address: tuple[str, int], event_delay: float, verbose: bool) -> None:
        super().__init__(address, _Handler)
        self.event_delay, self.verbose = event_delay, verbose
        self.recorder = Recorder()
        self.cache = _brain.PromptCache()
        self.stopping = threading.Event()
        self._refused: dict[bytes, int] = {}  # body digest -> 429s answered so far
        self._refused_lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._changed = threading.Condition()

    def refuse(self, key: bytes, times: int) -> bool:
        """True (and counted) while fewer than ``times`` requests with ``key`` (a model call's
        body, a tool call's method, path, query and body) were refused."""
        digest = hashlib.sha256(key).digest()
        with self._refused_lock:
            refused = self._refused.get(digest, 0)
            if refused >= times:
                return False
            self._refused[digest] = refused + 1
            return True

    def track(self, connection: socket.socket) -> None:
        with self._changed:
            self._open.add(connection)
            if self.stopping.is_set():  # accepted just before stop(): don't let it linger
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)

    def shutdown_request(self, request: Any) -> None:
        super().shutdown_request(request)
        with self._changed:
            self._open.discard(request)
            self._changed.notify_all()

    def drop_connections(self, timeout: float = 5.0) -> None:
        """Wake handlers idling on keep-alive connections and wait until all are closed."""
        with self._changed:
            for connection in self._open:
                with contextlib.suppress(OSError):  # already closed by the peer
                    connection.shutdown(socket.SHUT_RDWR)
            self._changed.wait_for(lambda: not self._open, timeout)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if self.verbose:
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "standin/1.0"
    sys_version = ""
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Small SSE writes must leave at once, not wait for the client's delayed ACK.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.track(self.connection)

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def _dispatch(self) -> None:
        try:
            self._route()
        except OSError:
            self.close_connection = True  # the client went away; nothing left to tell it

    def _route(self) -> None:
        path, _, query = self.path.partition("?")
        body = self._read_body()
        if path.startswith("/_standin/"):
            self._admin(path)
            return
        headers = list(self.headers.items())
        self.server.recorder.add(RecordedRequest(self.command, path, query, headers, body))
        if path.startswith("/tools/"):
            call = f"{self.command} {path}?{query}\n".encode() + body
            if self.server.refuse(call, self._fail_first(None)):
                self._send(tools.failed(self._fail_status()))
                return
            self._send(tools.handle(self.command, path, query, body))
            return
        sink = next((reply for s, reply in _SINKS.items() if path.endswith(s)), None)
        if sink is not None:
            self._send(sink)
            return
        endpoint = next((e for s, e in _ENDPOINTS.items() if path.endswith(s)), None)
        if endpoint is None:
            self._send(json_reply(404, {"error": {"message": f"no route for {path}"}}))
            return
        if self.command != "POST":
            self._send(endpoint.error(405, "invalid_request_error", "use POST"))
            return
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if not isinstance(request, dict):
            self._send(endpoint.error(400, "invalid_request_error", "body must be a JSON object"))
            return
        model = request.get("model")
        if model == "standin-error":
            self._send(endpoint.rate_limited(str(model)))
            return
        if self.server.refuse(body, self._fail_first(model)):
            status = self._fail_status()
            if status == 429:
                self._send(endpoint.rate_limited(str(model)))
            else:
                error = endpoint.error(status, endpoint.server_error, SERVER_ERROR)
                self._send(JsonReply(status, error.body, (*error.headers, RETRY_SOON)))
            return
        if model == "standin-slow" and self.server.stopping.wait(SLOW_SECONDS):
            self.close_connection = True
            return
        seed = request.get("seed")
        rng = random.Random(seed) if isinstance(seed, int) else random.Random()
        self._send(endpoint.handle(request, rng, self.server.cache), cut=model == "standin-cut")

    def _fail_first(self, model: object) -> int:
        """How many requests of one body to refuse before answering (``standin-flaky``: 1)."""
        header = self.headers.get(FAIL_FIRST_HEADER, "").strip()
        if header.isdigit():
            return int(header)
        return 1 if model == "standin-flaky" else 0

    def _fail_status(self) -> int:
        """The status a refused request gets: ``x-standin-fail-status``, else 429."""
        header = self.headers.get(FAIL_STATUS_HEADER, "").strip()
        return int(header) if header.isdigit() and 400 <= int(header) <= 599 else 429

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(parts)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _admin(self, path: str) -> None:
        if path == "/_standin/requests" and self.command == "GET":
            listing = [r.to_dict() for r in self.server.recorder.snapshot()]
            self._send(json_reply(200, listing))
        elif path == "/_standin/requests" and self.command == "DELETE":
            self.server.recorder.clear()
            self._send(JsonReply(204, b""))
        elif path == "/_standin/health":
            self._send(json_reply(200, {"ok": True}))
        else:
            self._send(json_reply(404, {"error": {"message": f"no route for {path}"}}))

    def _send(self, reply: Reply, *, cut: bool = False) -> None:
        if isinstance(reply, SseReply):
            self._send_stream(reply, cut=cut)
            return
        self.send_response(reply.status)
        if reply.status != 204:
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply.body)))
        for name, value in reply.headers:
            self.send_header(name, value)
        self.end_headers()
        if cut:
            self.wfile.write(reply.body[: len(reply.body) // 2])
            self._drop()
            return
        self.wfile.write(reply.body)

    def _send_stream(self, reply: SseReply, *, cut: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in reply.headers:
            self.send_header(name, value)
        self.end_headers()
        events = (
            reply.events[: min(CUT_AFTER_EVENTS, len(reply.events) - 1)] if cut else reply.events
        )
        for i, event in enumerate(events):
            if (
                i
                and self.server.event_delay > 0
                and self.server.stopping.wait(self.server.event_delay)
            ):
                break
            # One write per event so each HTTP chunk is one whole SSE event.
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        if cut or self.server.stopping.is_set():
            self._drop()
            return
        self.wfile.write(b"0\r\n\r\n")

    def _drop(self) -> None:
        """Close the connection abruptly, as a crashing upstream would."""
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)
