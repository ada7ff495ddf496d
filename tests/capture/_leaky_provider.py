"""A provider that leaks: a loopback HTTP server that speaks the OpenAI and Anthropic wire
protocols and echoes the caller's credentials back in every way a careless service (or a
debugging proxy) does. It keeps every byte it receives, so a test can prove the secrets really
were sent.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Values the server plants in what it sends, as a model or a proxy might.
ESCAPED_PATTERN_SECRET = "CUSTOM-4242-1717"  # sent as \u0043USTOM-4242-1717
SPLIT_PATTERN_SECRET = "CUSTOM-9090-3131"  # streamed across events
STREAM_ECHO_TAIL = " (as you asked)"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def _received(self) -> tuple[bytes, str]:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        head = f"{self.command} {self.path}\n{self.headers}".encode()
        with self.server.lock:
            self.server.received.append(head + body)
        key = self.headers.get("authorization", "").removeprefix("Bearer ")
        return body, key or self.headers.get("x-api-key", "")

    def do_GET(self) -> None:
        self._received()
        self._send(200, {"content-type": "application/json"}, b'{"ok":true,"stock":3}')

    def do_POST(self) -> None:
        body, key = self._received()
        request: dict[str, Any] = json.loads(body or b"{}")
        if self.path.endswith("/v1/messages"):
            # A 401 whose message quotes the key, as some gateways do.
            error = {
                "type": "error",
                "error": {"type": "authentication_error", "message": f"invalid x-api-key: {key}"},
            }
            self._send(401, {"content-type": "application/json"}, json.dumps(error).encode())
        elif request.get("stream"):
            self._stream(key)
        elif self.path.endswith("/chat/completions"):
            self._chat(key)
        else:
            self._send(200, {"content-type": "application/json"}, b'{"saved":true}')

    def _chat(self, key: str) -> None:
        escaped_key = "".join(f"\\u{ord(c):04x}" if c == "-" else c for c in key)
        hidden = "\\u0043" + ESCAPED_PATTERN_SECRET[1:]
        content = f"Your key is {key}; escaped {escaped_key}; and {hidden}."
        body = (
            '{"id":"chatcmpl-leak","object":"chat.completion","created":1,'
            '"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant",'
            f'"content":"{content}"}},"finish_reason":"stop"}}],'
            '"usage":{"prompt_tokens":9,"completion_tokens":9,"total_tokens":18}}'
        ).encode()
        headers = {
            "content-type": "application/json",
            "x-debug-auth": f"Bearer {key}",
            "x-echo": f"received {key}",
            "set-cookie": "session=cookie-from-server-5c6d7e8f; Path=/",
        }
        self._send(200, headers, body)

    def _stream(self, key: str) -> None:
        text = f"Key {key} and {SPLIT_PATTERN_SECRET}{STREAM_ECHO_TAIL}"
        pieces = [text[at : at + 5] for at in range(0, len(text), 5)]
        events = []
        for piece in pieces:
            chunk = {
                "id": "chatcmpl-leak",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "gpt-4o-mini",
                "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
            }
            events.append(f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n")
        last = {
            "id": "chatcmpl-leak",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }
        events.append(f"data: {json.dumps(last, separators=(',', ':'))}\n\ndata: [DONE]\n\n")
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for event in events:
            data = event.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.received: list[bytes] = []


class LeakyProvider:
    """The server in a thread; ``url`` is its base, ``received()`` every request's bytes."""

    def __init__(self) -> None:
        self._server = _Server()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> LeakyProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def received(self) -> bytes:
        with self._server.lock:
            return b"\n".join(self._server.received)
