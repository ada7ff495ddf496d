"""The bounded hand-off of finished steps from the application thread to the ``replay``
exporter (:func:`handoff`)."""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otel_replay.step import Step

__all__ = [
    "ITEM_OVERHEAD",
    "Consumer",
    "DurableFlush",
    "Handed",
    "Handoff",
    "handoff",
    "register_flush",
]

_log = logging.getLogger(__name__)

MAX_BYTES = 256 * 1024 * 1024
"""What the process hand-off holds before puts wait: room for a stalled store to catch up on
thousands of steps, yet a small share of an agent host's memory."""

WAIT_S = 1.0
"""Longest a put waits for room in a full hand-off: a store's brief stall (a pack rotating, a
remote round trip) costs a pause, a stuck store one pause, then drops."""

ITEM_OVERHEAD = 4096
"""Bytes counted per step beyond its bodies: the span (its attributes often repeat the
messages) and the step's headers and timings."""

CLAIMS_MAX = 1 << 16
"""Claimed span ids remembered at most; the oldest are forgotten beyond (a span the batch
processor dropped is never asked about)."""


Handed = tuple[Step, Any, int]
"""What a consumer gets for one step: the step, its span (an SDK span, possibly not
ended yet) and the bytes it counts against the bound (give them back with ``release``)."""


class Consumer:
    """One consumer's end of the hand-off: its own FIFO queue of :data:`Handed` steps.

    The consumer may :meth:`post` its own messages into the queue; they come out in order with
    the steps, which makes them barriers.
    """

    __slots__ = ("_handoff", "_queue", "held")

    def __init__(self, handoff: Handoff) -> None:
        self._handoff = handoff
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self.held = 0
        """Bytes of this consumer's steps not released yet."""

    def get(self, timeout: float | None = None) -> object | None:
        """The next step or message, waiting up to ``timeout`` seconds (None: forever);
        None when there is none."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def backlog(self) -> int:
        """About how many steps and messages are queued."""
        return self._queue.qsize()

    def drain(self, limit: int | None = None) -> list[object]:
        """Everything queued now (at most ``limit`` items), without waiting."""
        out: list[object] = []
        get = self._queue.get_nowait
        try:
            while limit is None or len(out) < limit:
                out.append(get())
        except queue.Empty:
            pass
        return out

    def steps(self) -> dict[int, Step]:
        """Drain the queue: the steps in it, by span id (other messages and the spans are
        dropped, the bytes released). For tests and simple consumers."""
        out: dict[int, Step] = {}
        size = 0
        for item in self.drain():
            if type(item) is tuple:
                step, _, item_size = item
                out[step.span_id] = step
                size += item_size
        self.release(size)
        return out

    def post(self, message: object) -> None:
        """Queue ``message`` behind every step put so far. Safe in a signal handler."""
        self._queue.put(message)

    def release(self, size: int) -> None:
        """Give back the bytes of steps that are durable (or given up on)."""
        self._handoff._release(self, size)


class Handoff:
    """The process-wide hand-off; see the module docstring.

    ``max_bytes`` bounds what is held; ``wait_s`` is the longest a put waits for room.
    """

    def __init__(self, max_bytes: int = MAX_BYTES, wait_s: float = WAIT_S) -> None:
        self.max_bytes = max_bytes
        self.wait_s = wait_s
        self._init_state()
        if hasattr(os, "register_at_fork"):
            reinit = weakref.WeakMethod(self._init_state)

            def after_in_child() -> None:
                method = reinit()
                if method is not None:
                    method()

            os.register_at_fork(after_in_child=after_in_child)

    def _init_state(self) -> None:
        # Also run in a forked child: the parent persists what it held, the child starts empty
        # (and with fresh locks, in case a thread of the parent held one at the fork).
        # The fast path takes the bare lock (a C-level context manager); waits use the
        # condition built on it.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._consumers: list[Consumer] = []
        self._active: Consumer | None = None
        # An OrderedDict: forgetting the oldest claim of a plain dict scans the slots its
        # earlier deletions left (a cost that grows with the churn, paid under the lock).
        self._claims: OrderedDict[int, None] = OrderedDict()
        self._bytes = 0
        self._shedding = False
        self.dropped = 0
        """Steps refused because the bound was reached (exposed in the exporter's stats)."""
        self.late = 0
        """Steps that began for a consumer and ended after every consumer had detached (a
        stream still read after the exporter shut down): not in any store."""

    @property
    def wanted(self) -> bool:
        """True when a consumer is attached; the capture skips building steps otherwise."""
        return self._active is not None

    @property
    def held_bytes(self) -> int:
        """Bytes counted for steps not yet released by their consumer."""
        return self._bytes

    def attach(self) -> Consumer:
        """A new consumer, which receives every step put from now on until it detaches (or
        another consumer attaches after it, until that one detaches)."""
        consumer = Consumer(self)
        with self._cond:
            self._consumers.append(consumer)
            self._active = consumer
        return consumer

    def detach(self, consumer: Consumer) -> None:
        """Stop sending steps to ``consumer``; what it holds no longer counts against the
        bound. What is already in its queue stays there for it to drain."""
        with self._cond:
            if consumer in self._consumers:
                self._consumers.remove(consumer)
                self._bytes -= consumer.held
                consumer.held = 0
            self._active = self._consumers[-1] if self._consumers else None
            if self._active is None:
                self._claims.clear()
                self._bytes = 0
            self._shedding = False
            self._cond.notify_all()

    def put(self, step: Step, span: Any) -> bool:
        """Hand ``step`` and its ``span`` to the active consumer, claiming the span.

        False when nobody wants it any more (counted in :attr:`late`: the step began while a
        consumer was attached), or when the bound was reached and no room came within
        ``wait_s`` (then it is counted in :attr:`dropped`).
        """
        size = step.size + ITEM_OVERHEAD
        with self._lock:
            if self._active is None:
                self.late += 1
                if self.late > 1:
                    return False
                full = False
            elif self._bytes + size > self.max_bytes and not self._make_room(size):
                self.dropped += 1
                if self.dropped > 1:
                    return False
                full = True
            else:
                consumer = self._active
                if consumer is None:  # it detached while we waited
                    return False
                self._bytes += size
                consumer.held += size
                claims = self._claims
                claims[step.span_id] = None
                if len(claims) > CLAIMS_MAX:
                    claims.popitem(last=False)
                consumer._queue.put((step, span, size))
                return True
        if full:
            _log.warning(
                "otel-replay: the capture hand-off is full (%d bytes) and the replay exporter "
                "did not make room within %.1f s; steps are being dropped (counted in "
                "ReplaySpanExporter.stats().dropped)",
                self.max_bytes,
                self.wait_s,
            )
        else:
            _log.warning(
                "otel-replay: a step ended after the replay exporter had shut down (a response "
                "still being read after the tracer provider's shutdown, on a thread of its "
                "own?): it is not in the store (counted in Handoff.late)"
            )
        return False

    def _make_room(self, size: int) -> bool:
        """Wait (lock held) until ``size`` more bytes fit or the consumer detaches. False on
        timeout, or at once when waiting is pointless: the step alone exceeds the bound, or an
        earlier wait timed out and no room was made since."""
        if self._shedding or size > self.max_bytes:
            return False
        deadline = time.monotonic() + self.wait_s
        while self._bytes + size > self.max_bytes and self._active is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._shedding = True
                return False
            self._cond.wait(remaining)
        return True

    def post(self, message: object) -> bool:
        """Queue ``message`` for the active consumer, behind every step put so far; False (and
        nothing kept) when no consumer is attached. Never waits, never counts bytes."""
        consumer = self._active
        if consumer is None:
            return False
        consumer.post(message)
        return True

    def claimed(self, span_ids: set[int]) -> set[int]:
        """Those of ``span_ids`` whose spans came through the hand-off (each id is answered
        once: a span reaches an exporter once)."""
        found = set()
        with self._cond:
            claims = self._claims
            for span_id in span_ids:
                if span_id in claims:
                    del claims[span_id]
                    found.add(span_id)
        return found

    def _release(self, consumer: Consumer, size: int) -> None:
        with self._cond:
            if consumer in self._consumers:
                consumer.held -= size
                self._bytes -= size
            self._shedding = False
            self._cond.notify_all()


_process_handoff: Handoff | None = None
_process_handoff_lock = threading.Lock()


def handoff() -> Handoff:
    """The process-wide hand-off the capture puts into and the ``replay`` exporter drains,
    made on first use (every call returns the same one), bounded by :data:`MAX_BYTES` and
    :data:`WAIT_S`."""
    global _process_handoff  # noqa: PLW0603 - one per process, made on first use
    made = _process_handoff
    if made is None:
        with _process_handoff_lock:
            made = _process_handoff
            if made is None:
                made = Handoff()
                _process_handoff = made
    return made


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
