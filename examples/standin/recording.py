"""What the stand-in received: every request, with its exact body bytes."""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RecordedRequest:
    """One request as it arrived. `headers` keeps the client's order, case and duplicates;
    `body` is the exact payload (de-chunked if it was sent chunked)."""

    method: str
    path: str
    query: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        """The first value of header `name` (case-insensitive), or None."""
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def json(self) -> Any:
        return json.loads(self.body)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form served by `GET /_standin/requests` (body in base64)."""
        return {
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "headers": [list(pair) for pair in self.headers],
            "body_b64": base64.b64encode(self.body).decode(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RecordedRequest:
        return cls(
            method=data["method"],
            path=data["path"],
            query=data["query"],
            headers=[(k, v) for k, v in data["headers"]],
            body=base64.b64decode(data["body_b64"]),
        )


class Recorder:
    """A thread-safe log of requests; `snapshot()` returns a copy safe to iterate."""

    def __init__(self) -> None:
        self._items: list[RecordedRequest] = []
        self._lock = threading.Lock()

    def add(self, request: RecordedRequest) -> None:
        with self._lock:
            self._items.append(request)

    def snapshot(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
