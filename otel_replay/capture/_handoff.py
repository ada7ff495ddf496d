"""The bounded hand-off from the application thread to the export stage.

The application thread puts one :class:`Fixture` per finished step; the ``replay`` exporter
takes it when the step's span reaches it. Nothing is held unless a consumer is attached, so a
process that exports only to a backend keeps no bodies in memory. The bound is in bytes; a
put past it is refused and counted, never blocks the application.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

__all__ = ["Fixture", "Handoff"]

_log = logging.getLogger(__name__)


@dataclass(slots=True)
class Fixture:
    """Everything the store needs to serve one step back byte-exact.

    Bodies are the exact bytes after redaction (the response body decoded from any
    content-encoding); ``chunks`` holds, for each chunk the application received, its size and
    its arrival time in nanoseconds after the request was sent.
    """

    run_id: str
    step_index: int
    trace_id: int
    span_id: int
    kind: str
    method: str
    url: str
    request_headers: list[tuple[str, str]]
    request_body: bytes
    request_hash: str
    status_code: int | None = None
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    response_body: bytes = b""
    response_hash: str | None = None
    chunks: list[tuple[int, int]] = field(default_factory=list)
    complete: bool = False
    error_type: str | None = None
    start_ns: int = 0
    end_ns: int = 0

    @property
    def size(self) -> int:
        """Bytes of body this fixture keeps alive."""
        return len(self.request_body) + len(self.response_body)


class Handoff:
    """Fixtures keyed by span id, bounded by ``max_bytes`` of body."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._items: dict[int, Fixture] = {}
        self._bytes = 0
        self._consumers = 0
        self.dropped = 0
        """Fixtures refused because the bound was reached (exposed for the exporter's stats)."""

    @property
    def wanted(self) -> bool:
        """True when a consumer is attached; the capture skips building fixtures otherwise."""
        return self._consumers > 0

    @property
    def held_bytes(self) -> int:
        """Bytes of body currently waiting for the exporter."""
        return self._bytes

    def attach(self) -> None:
        """Register a consumer (the ``replay`` exporter does this when it is built)."""
        with self._lock:
            self._consumers += 1

    def detach(self) -> None:
        """Unregister a consumer; when none is left, held fixtures are released."""
        with self._lock:
            self._consumers = max(0, self._consumers - 1)
            if not self._consumers:
                self._items.clear()
                self._bytes = 0

    def put(self, fixture: Fixture) -> bool:
        """Hold ``fixture`` for the exporter. False (and counted) when nobody wants it or the
        bound is reached."""
        size = fixture.size
        with self._lock:
            if not self._consumers:
                return False
            if self._bytes + size > self._max_bytes:
                self.dropped += 1
                first = self.dropped == 1
            else:
                self._items[fixture.span_id] = fixture
                self._bytes += size
                return True
        if first:
            _log.warning(
                "otel-replay: capture hand-off is full (%d bytes); dropping fixtures, "
                "the exporter is not keeping up",
                self._max_bytes,
            )
        return False

    def take(self, span_id: int) -> Fixture | None:
        """Remove and return the fixture of ``span_id``, or None if there is none."""
        with self._lock:
            fixture = self._items.pop(span_id, None)
            if fixture is not None:
                self._bytes -= fixture.size
            return fixture

    def __len__(self) -> int:
        return len(self._items)
