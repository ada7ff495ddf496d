"""A span processor whose ``force_flush`` waits until recorded steps are durable.

``TracerProvider.force_flush()`` asks each processor in turn. The SDK's batch processor
answers True once it has handed its queue to the exporters, whatever they did with it, and
the ``replay`` exporter writes on a thread of its own: without this processor a True from the
provider would not mean the fixtures are on disk. The instrumentor adds it after the
provider's other processors, so it runs once they have exported; it asks every live
``replay`` exporter to make everything handed over so far durable, within the timeout.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

__all__ = ["DurableFlush", "register_flush"]

Flush = Callable[[int], bool]
"""``flush(timeout_millis)``: True once everything handed over so far is durable."""

_flushes: list[weakref.WeakMethod[Flush]] = []
_lock = threading.Lock()


def register_flush(flush: Flush) -> None:
    """Have :class:`DurableFlush` call ``flush`` (a bound method, held weakly)."""
    with _lock:
        _flushes.append(weakref.WeakMethod(flush))


class DurableFlush(SpanProcessor):
    """See the module docstring; it does nothing with spans."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing to do."""

    def on_end(self, span: ReadableSpan) -> None:
        """Nothing to do."""

    def shutdown(self) -> None:
        """Nothing to do: each exporter is shut down by its own processor."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """True when every live ``replay`` exporter made what it holds durable in time."""
        deadline = time.monotonic() + timeout_millis / 1000
        with _lock:
            live = [flush for ref in _flushes if (flush := ref()) is not None]
            _flushes[:] = [ref for ref in _flushes if ref() is not None]
        ok = True
        for flush in live:
            left = max(0, int((deadline - time.monotonic()) * 1000))
            ok = flush(left) and ok
        return ok
