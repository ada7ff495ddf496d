"""Deferred step work: what need not run on the application thread runs on a worker.

The application thread hashes the exact bytes, starts the step's span (so context propagation
and nesting work) and queues the rest: codec parsing into GenAI attributes, canonical JSON
(prompt hash, tool schema version, content attributes), metrics, the hand-off to the exporter
and ending the span with the end time taken on the application thread. Under the GIL this
saves the application nothing in a CPU-bound loop, but a real agent waits on the network for
most of each call, and the worker runs then.

A span ends only once its attributes are set, so every exporter sees it complete. Work is
deferred only for spans whose tracer feeds nothing but :class:`BatchSpanProcessor`\\ s (which
export later anyway) and :class:`DrainProcessor`; a synchronous processor (a
``SimpleSpanProcessor``, an unknown one, a non-SDK tracer) keeps the work on the application
thread, so what it exports on span end is what it always got. Before any of those batch
processors flushes or shuts down, the :class:`DrainProcessor` we put first in the provider's
processor list finishes everything queued (the ``replay`` exporter drains too, at
``force_flush``, shutdown and SIGTERM, and so does an exit hook registered when the worker
starts, ahead of the providers' own, so the meter provider gets the last metrics).

The queue is bounded in steps: when it is full the application thread does its step's work
itself, which is the back-pressure.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import SpanProcessor, SynchronousMultiSpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import ProxyTracer, Tracer

__all__ = ["FINISHER", "DrainProcessor", "Finisher"]

_log = logging.getLogger(__name__)

QUEUE_MAX = 1024
"""Steps queued at most; beyond, the application thread does its step's work itself."""

Job = Callable[[], None]


class Finisher:
    """A lazily started worker thread running queued step work in order."""

    def __init__(self, max_items: int = QUEUE_MAX) -> None:
        self.max_items = max_items
        self._reset()
        if hasattr(os, "register_at_fork"):
            ref = weakref.WeakMethod(self._reset)

            def after_in_child() -> None:
                method = ref()
                if method is not None:
                    method()

            os.register_at_fork(after_in_child=after_in_child)

    def _reset(self) -> None:
        # Also run in a forked child: the parent's thread did not come along.
        self._queue: queue.SimpleQueue[Job | threading.Event] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._queued = 0  # jobs put and not yet run (approximate across threads is fine)
        self._processors: dict[int, tuple[object, bool]] = {}

    def submit(self, job: Job) -> bool:
        """Queue ``job``; False when the queue is full (then run it yourself)."""
        if self._queued >= self.max_items:
            return False
        if self._thread is None:
            self._start()
        self._queued += 1
        self._queue.put(job)
        return True

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every job queued so far has run; True unless ``timeout`` expired.

        Called on the worker itself (a job that ends a span can reach a processor's
        ``force_flush``), it returns at once.
        """
        thread = self._thread
        if thread is None or thread is threading.current_thread() or not thread.is_alive():
            return True
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def defers(self, tracer: Tracer) -> bool:
        """True when spans of ``tracer`` may end on the worker (see the module docstring)."""
        if isinstance(tracer, ProxyTracer):
            tracer = tracer._tracer
        multi = getattr(tracer, "span_processor", None)
        if type(multi) is not SynchronousMultiSpanProcessor:
            return False
        processors = multi._span_processors
        known = self._processors.get(id(multi))
        if known is not None and known[0] is processors:
            return known[1]
        defer = all(type(p) in _BATCHING for p in processors)
        if defer and (not processors or type(processors[0]) is not DrainProcessor):
            # First in line, so a flush or shutdown drains us before any batch processor.
            with multi._lock:
                rest = tuple(p for p in multi._span_processors if type(p) is not DrainProcessor)
                multi._span_processors = (DrainProcessor(self), *rest)
            processors = multi._span_processors
            defer = all(type(p) in _BATCHING for p in processors)
        self._processors[id(multi)] = (processors, defer)
        return defer

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                thread = threading.Thread(
                    target=self._run, name="otel-replay-finisher", daemon=True
                )
                thread.start()
                self._thread = thread
                # Registered after the providers were made, so it runs before their exit
                # hooks: no metric or span of a step still being finished is lost at exit.
                atexit.register(self.drain)

    def _run(self) -> None:
        get = self._queue.get
        while True:
            item = get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            self._queued -= 1
            try:
                item()
            except Exception as exc:  # jobs report their own failures; this is a bug of ours
                _log.debug("otel-replay: a deferred step job failed: %r", exc)


class DrainProcessor(SpanProcessor):
    """Finishes the deferred step work before the processors behind it flush or shut down."""

    def __init__(self, finisher: Finisher) -> None:
        self._finisher = finisher

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: Any) -> None:
        pass

    def shutdown(self) -> None:
        self._finisher.drain()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._finisher.drain(timeout_millis / 1000)


_BATCHING: frozenset[type[Any]] = frozenset({BatchSpanProcessor, DrainProcessor})

FINISHER = Finisher()
"""The process-wide worker for deferred step work."""
