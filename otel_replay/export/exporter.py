"""The ``replay`` span exporter: three methods over the hand-off and the writer thread."""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import wrapt
from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_replay import settings
from otel_replay._exit import alone, before_shutdown
from otel_replay._printable import printable
from otel_replay._workers import add_part, at_worker_exit, at_worker_start
from otel_replay.errors import ConfigError
from otel_replay.export import _sigterm
from otel_replay.export._encode import run_id_of, span_to_dict
from otel_replay.export._writer import Failures, Writer
from otel_replay.runs import (
    WORKER_EXIT_PRIORITY,
    Handoff,
    exit_flush,
    inherited_runs,
    register_flush,
)
from otel_replay.runs import handoff as process_handoff
from otel_replay.store import Store, new_recording_id

__all__ = ["DROPPED_STEPS", "ExporterStats", "ReplaySpanExporter", "observe_drops"]

_log = logging.getLogger("otel_replay.export")

WAIT_BACKLOG_MAX = 64
"""``export()`` waits for durability only when at most this many items are queued ahead."""


@dataclass(frozen=True, slots=True)
class ExporterStats:
    """What a :class:`ReplaySpanExporter` has done so far.

    ``dropped`` counts steps the capture hand-off refused because it stayed full for its wait
    (process-wide); ``failed`` counts steps and spans given up (refused by the store as
    invalid, or still unwritable at shutdown). Both are zero unless something went wrong, and
    each kind is logged.
    """

    steps: int
    """Steps written durably."""
    spans: int
    """Spans written durably."""
    pending: int
    """Steps and spans taken from the queue, not durable yet."""
    dropped: int
    failed: int
    flush_errors: int
    """Attempts to open or write the store that failed (each one retried)."""
    held_bytes: int
    """Bytes the hand-off holds for steps not durable yet (queued or being written)."""


class ReplaySpanExporter(SpanExporter):
    """Writes recorded steps and every span of a recorded run into a store, beside whatever
    other exporter the application uses.

    ``store`` is a :class:`~otel_replay.store.Store` (not closed by the exporter), a location
    (path or fsspec URL), or None for ``OTEL_REPLAY_STORE``. It is opened on the exporter's
    own thread, so a bad location is logged (``export`` returns FAILURE), never raised; a bad
    ``OTEL_REPLAY_*`` setting turns the exporter off with one log line, since raising inside
    the SDK's start-up would cost the user their other exporters. Drops are counted in
    :meth:`stats` and the metric ``otel_replay.exporter.dropped_steps`` (``meter_provider``,
    default the global one). How nothing is lost: docs/architecture.md, "Export".
    """

    def __init__(
        self,
        store: Store | str | os.PathLike[str] | None = None,
        *,
        handoff: Handoff | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        try:
            config = settings.load()
        except ConfigError as exc:
            if not settings.replay_requested():  # else the replay's boot exits, saying why
                settings.turn_off(exc)
            self._off = self._closed = True
            self._where = str(store.location if isinstance(store, Store) else store or "")
            return
        self._off = False
        self._handoff = handoff if handoff is not None else process_handoff()
        try:
            observe_drops(self._handoff, meter_provider)
        except Exception as exc:  # a metrics SDK problem must not stop recording
            _log.error("otel-replay: cannot report drops as a metric: %r", exc)
        self._timeout = config.flush_timeout_ms / 1000
        self._sample_ok = config.sample_ok
        self._failures = Failures()
        self._open: Callable[[], Store]
        if isinstance(store, Store):
            given = store
            self._where = given.location
            self._owns_store = False
            self._recording = given.recording
            self._open = lambda: given
        else:
            # Anchored now: the store is opened on the writer's thread at the first write, by
            # when the application may have changed its directory (the recording then went
            # elsewhere, or its later writes failed).
            where = Store.anchor(store if store is not None else config.store)
            self._where = where
            self._owns_store = True
            # Chosen now, not when the store opens: worker processes started before that
            # write into this recording too.
            self._recording = new_recording_id()
            self._open = self._open_joined
        self._closed = False
        register_flush(self.force_flush)
        self._stuck_at: int | None = None  # the writer's cycle count when a wait timed out
        self._writer = self._start_writer()
        self._on_sigterm = config.handle_sigterm and _sigterm.install(self, self._timeout)
        _LIVE.add(self)
        add_part(PART, _ticket, _take_ticket)
        # For exporters whose provider is never shut down: write what is held at exit (the
        # provider's own atexit shutdown, when there is one, runs after this and finishes).
        atexit.register(self._flush_at_exit)
        # First, while a remote store's client still works (``otel_replay._exit``).
        before_shutdown(self._flush_before_shutdown, 10)
        self._paused: Writer | None = None  # the writer a fork under way keeps out of the store
        self._follow_forks()

    def _start_writer(self) -> Writer:
        self._consumer = self._handoff.attach()
        writer = Writer(
            self._consumer,
            self._open_store,
            self._where,
            owns_store=self._owns_store,
            failures=self._failures,
            sample_ok=self._sample_ok,
        )
        writer.start()
        return writer

    @property
    def location(self) -> str:
        """Where the store is: a path or a URL."""
        return self._where

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Persist the recorded spans of ``spans`` that did not come through the capture
        hand-off, and return once everything handed over so far is durable.

        SUCCESS when it is (or when the exporter is off); FAILURE when the store cannot be
        written or the writer did not finish within ``OTEL_REPLAY_FLUSH_TIMEOUT_MS``. Under
        overload (more than :data:`WAIT_BACKLOG_MAX` items queued) it does not wait, so the
        batch processor never backs up because of it, and answers from the writer's state.
        Never raises.
        """
        if self._off:
            return SpanExportResult.SUCCESS
        if self._closed:
            return SpanExportResult.FAILURE
        try:
            recorded = {
                span.context.span_id: span
                for span in spans
                if span.context is not None and run_id_of(span) is not None
            }
            if recorded:
                came = self._handoff.claimed(set(recorded))
                own = [span_to_dict(s) for i, s in recorded.items() if i not in came]
                if own:
                    self._writer.submit(own)
            if self._writer.backlog() > WAIT_BACKLOG_MAX:
                # Overloaded: the writer writes it all on its own; waiting here would only
                # back the batch processor up until its queue drops spans.
                ok = not self._writer.failing and self._stuck_at is None
            else:
                ok = self._wait()
        except Exception as exc:
            self._failures.report("export", "export failed: %r", exc)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait until every step and span handed over so far is durable (at most
        ``timeout_millis``); True when it is (or when the exporter is off)."""
        if self._closed:
            return self._off
        return self._wait(min(timeout_millis / 1000, self._timeout))

    def _wait(self, timeout: float | None = None) -> bool:
        """Wait for the writer to make everything so far durable. After a wait timed out,
        later ones fail at once until the writer moves again: a stuck store must not stall
        every span end (a SimpleSpanProcessor exports on the application thread)."""
        writer = self._writer
        if self._stuck_at is not None:
            if writer.cycles == self._stuck_at:
                return False
            self._stuck_at = None
        cycles = writer.cycles
        ok = writer.barrier(self._timeout if timeout is None else timeout)
        if not ok and writer.cycles == cycles:
            self._stuck_at = cycles
        return ok

    def shutdown(self, timeout_millis: float | None = None) -> None:
        """Write everything held (steps whose span is still open too), close the store if
        the exporter opened it, and stop. Later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        timeout = self._timeout if timeout_millis is None else timeout_millis / 1000
        atexit.unregister(self._flush_at_exit)
        if self._on_sigterm:
            _sigterm.uninstall(self)
        # Detach first: every step put before this is in our queue, ahead of the final barrier.
        self._handoff.detach(self._consumer)
        writer = self._writer
        ok = writer.stop(timeout)
        stats = self.stats()
        # What the store still refused at the end, or what the writer, stuck, still holds.
        left = writer.lost if ok or not writer.alive() else writer.unwritten()
        if left.steps or left.spans:
            self._failures.report(
                "shutdown",
                "the replay exporter stopped with %s and %d spans not written to %s (%s)",
                _steps_of_runs(left.steps),
                left.spans,
                self._where,
                writer.error or "the store did not answer in time",
            )
        if stats.dropped:
            _log.warning(
                "otel-replay: %d steps were not recorded because the capture hand-off was full",
                stats.dropped,
            )

    def stats(self) -> ExporterStats:
        """Counters of what was written, is pending, was dropped or failed."""
        if self._off:
            return ExporterStats(0, 0, 0, 0, 0, 0, 0)
        writer = self._writer
        return ExporterStats(
            steps=writer.steps,
            spans=writer.spans,
            pending=writer.pending,
            dropped=self._handoff.dropped,
            failed=writer.failed,
            flush_errors=writer.flush_errors,
            held_bytes=self._handoff.held_bytes,
        )

    def _flush_on_signal(self, timeout_s: float) -> None:
        if not self._closed:
            self._writer.barrier(timeout_s, parked=True)

    def _flush_at_exit(self) -> None:
        if not self._closed:
            self._writer.barrier(self._timeout)

    def _flush_before_shutdown(self) -> None:
        """At exit, while a remote store's client still works: write what is held. With no
        other thread left, also steps whose span is still open, and close the store (merging
        at close writes too); what comes later (the application's exit hooks) opens it again."""
        if not self._closed:
            final = alone()
            self._writer.barrier(self._timeout, parked=final, close=final)

    def _open_store(self) -> Store:
        # Looked up when the writer opens the store: a worker started fresh may have joined
        # another recording by then (``_join``).
        return self._open()

    def _open_joined(self) -> Store:
        """This exporter's store, opened to write its recording (in a worker process, the
        recording of the process that started it, and the runs inherited from it)."""
        return Store.open(self._where, recording=self._recording, inherited_runs=inherited_runs())

    def _join(self, recording: str) -> None:
        """Write into ``recording``, the one of the process that started this one (a worker
        started fresh), when nothing was written yet."""
        if self._closed or self._writer.opened:
            return
        self._recording = recording
        self._owns_store = True
        self._open = self._open_joined

    def _follow_forks(self) -> None:
        """Take part in the process's forks, for as long as this exporter lives."""
        if not hasattr(os, "register_at_fork"):
            return
        ref = weakref.ref(self)

        def hook(method: Callable[[ReplaySpanExporter], None]) -> Callable[[], None]:
            def call() -> None:
                exporter = ref()
                if exporter is not None:
                    method(exporter)

            return call

        os.register_at_fork(
            before=hook(ReplaySpanExporter._before_fork),
            after_in_parent=hook(ReplaySpanExporter._resume_writer),
            after_in_child=hook(ReplaySpanExporter._after_fork_in_child),
        )

    def _before_fork(self) -> None:
        # The child's store must not begin with the parent's mid-use (``Writer.pause``). A
        # store stuck past the flush timeout does not hold the fork up longer: a child whose
        # steps then cannot be written says so as it ends (``_flush_at_worker_exit``).
        if self._writer.pause(self._timeout):
            self._paused = self._writer

    def _resume_writer(self) -> None:
        paused, self._paused = self._paused, None
        if paused is not None:
            paused.resume()

    def _after_fork_in_child(self) -> None:
        # The parent writes what it held; the child starts a writer of its own (the hand-off
        # has already forgotten the parent's consumers) with a store of its own, which
        # writes into the parent's recording: the runs the child continues stay one run.
        self._resume_writer()
        if self._closed:
            return
        self._owns_store = True
        self._open = self._open_joined
        self._writer = self._start_writer()
        # A multiprocessing worker leaves through os._exit, never atexit: write at its end.
        priority = WORKER_EXIT_PRIORITY - 10  # after the root span ended and was handed over
        at_worker_exit(self, ReplaySpanExporter._flush_at_worker_exit, priority)

    def _flush_at_worker_exit(self) -> None:
        """A multiprocessing worker's end: write what is held; what could not be is named on
        one line, since the worker's exit runs no shutdown that would."""
        if self._closed or self._writer.barrier(self._timeout):
            return
        left = self._writer.abandon()
        if left.steps or left.spans:
            _log.error(
                "otel-replay: worker process %d ended with %s and %d spans not written to %s (%s)",
                os.getpid(),
                _steps_of_runs(left.steps),
                left.spans,
                self._where,
                self._writer.error or "the store did not answer in time",
            )


RUNS_NAMED = 5
"""Runs named, at most, in the line that says what could not be written."""


def _steps_of_runs(steps: dict[str, int]) -> str:
    """``12 steps of runs r_a (10), r_b (2)``, naming the runs with most steps first."""
    runs = sorted(steps.items(), key=lambda item: -item[1])
    named = ", ".join(f"{printable(run_id)} ({count})" for run_id, count in runs[:RUNS_NAMED])
    more = f" and {len(runs) - RUNS_NAMED} more" if len(runs) > RUNS_NAMED else ""
    return f"{sum(steps.values())} steps of runs {named}{more}" if runs else "0 steps"


PART = "recordings"
"""The exporters' part of a worker's ticket."""

_LIVE: weakref.WeakSet[ReplaySpanExporter] = weakref.WeakSet()


_waits_plainly = False


def _in_worker() -> None:
    """A multiprocessing worker waits for its tasks on a multiprocessing queue: before it does,
    it writes what it and the span processors feeding the store hold (so the parent, which
    may terminate it once it has the results, as ``Pool.__exit__`` does, loses nothing), and
    while it waits SIGTERM kills it as it would without us. A handler of ours could not be
    relied on there: a signal that lands just before the worker blocks is only handled when
    the wait returns, for an idle worker never."""
    global _waits_plainly  # noqa: PLW0603 - once per process (a forked child inherits it)
    if not _waits_plainly:
        _waits_plainly = True
        # Pool's task queue is a SimpleQueue, ProcessPoolExecutor's a Queue.
        for name in ("SimpleQueue.get", "Queue.get"):
            wrapt.wrap_function_wrapper("multiprocessing.queues", name, _wait_plainly)


def _wait_plainly(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    if not _LIVE or threading.current_thread() is not threading.main_thread():
        return wrapped(*args, **kwargs)
    # The spans still in a batch processor's queue first (a GenAI instrumentation's call
    # span, ending after its steps): SIGTERM in the wait would lose them with the process.
    with _sigterm.before_wait():
        exit_flush(final=False)
    for exporter in list(_LIVE):
        exporter.force_flush()
    with _sigterm.released():
        return wrapped(*args, **kwargs)


at_worker_start(_in_worker)


def _ticket() -> list[tuple[str, str]] | None:
    """The recordings a worker started fresh writes into: each live exporter's, by store."""
    found = [(e._where, e._recording) for e in list(_LIVE) if not e._closed]
    return found or None


def _take_ticket(part: Any) -> None:
    """In a worker started fresh: each exporter writing a store the parent writes joins the
    parent's recording there."""
    recordings = {str(where): str(recording) for where, recording in part}
    for exporter in list(_LIVE):
        recording = recordings.get(exporter._where)
        if recording is not None:
            exporter._join(recording)


DROPPED_STEPS = "otel_replay.exporter.dropped_steps"
"""Steps the hand-off refused because it stayed full (see ``ExporterStats.dropped``)."""

_lock = threading.Lock()
_observed: weakref.WeakKeyDictionary[Handoff, weakref.WeakSet[MeterProvider]] = (
    weakref.WeakKeyDictionary()
)
"""Per hand-off, the meter providers that observe it."""


def observe_drops(handoff: Handoff, meter_provider: MeterProvider | None = None) -> None:
    """Report ``handoff``'s drops as :data:`DROPPED_STEPS` through ``meter_provider`` (the
    global one when None). Calling it again for the same pair does nothing."""
    provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    with _lock:
        seen = _observed.setdefault(handoff, weakref.WeakSet())
        if provider in seen:
            return
        seen.add(provider)
    ref = weakref.ref(handoff)

    def observe(options: CallbackOptions) -> Iterable[Observation]:
        alive = ref()
        return [] if alive is None else [Observation(alive.dropped)]

    meter = provider.get_meter("otel_replay.export")
    meter.create_observable_counter(
        DROPPED_STEPS,
        callbacks=[observe],
        unit="{step}",
        description="Recorded steps lost because the capture hand-off stayed full "
        "past its wait; also ReplaySpanExporter.stats().dropped",
    )
