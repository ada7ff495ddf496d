"""Export: the ``replay`` span exporter, which persists fixtures and spans into the store.

``OTEL_TRACES_EXPORTER=otlp,replay`` makes the SDK build :class:`ReplaySpanExporter` with no
arguments (it reads ``OTEL_REPLAY_*``) and wrap it in a ``BatchSpanProcessor``, beside the OTLP
exporter, which is unaffected. In code: ``BatchSpanProcessor(ReplaySpanExporter(store=...))``.

How nothing is lost
-------------------
The batch processor's queue (``OTEL_BSP_MAX_QUEUE_SIZE``, 2048 by default) drops spans when
it overflows, so steps do not travel through it:

- **Hand-off, not the batch queue.** At the end of each step the capture puts the
  :class:`~otel_replay.step.Step` (its bytes and its facts) and the step's span into the
  exporter's own queue (:mod:`otel_replay.runs._handoff`), before ending the span; a
  ``run()`` block that exits puts its :class:`~otel_replay.step.RunEnd` there too. The
  exporter's writer thread (:mod:`._writer`) drains that queue; it is the only thread that
  touches the store. A step and its span are written in the same flush.
  Spans that do not come through the hand-off (the run's ``invoke_agent`` span, steps recorded
  before the exporter existed) arrive through ``export()`` as usual; a span that came through
  the hand-off is recognised there (it was *claimed* before it ended) and not written twice.
- **Back-pressure, then counted drops.** The hand-off is bounded in bytes
  (``OTEL_REPLAY_HANDOFF_MAX_BYTES``, 256 MiB) until a step is durable. When it is full, the
  application thread waits for room up to ``OTEL_REPLAY_HANDOFF_WAIT_MS`` (1 s): a burst slows
  to the store's pace instead of losing steps (the step's span then ends after the wait).
  Only a store that stays stuck makes the wait time out; the step is then dropped, counted
  (:meth:`ReplaySpanExporter.stats`, and the metric ``otel_replay.exporter.dropped_steps``)
  and logged, its span still reaches the store through
  ``export()``, and later puts do not wait again until the writer makes room.
- **Failures are kept and retried.** A flush that fails leaves the batch in the store's
  buffer; the writer retries with back-off, ``export()`` returns FAILURE meanwhile, and the
  failure is logged once (and its recovery once). Nothing raises into the application. On a
  full device (named so: ``no space left on the device holding the store at PATH``) each
  attempt writes as much as fits, each run's earliest steps first, and gives their room in
  the hand-off back; the rest is written as space frees. What the store still refuses at
  shutdown is named in one line: how many steps of which runs, how many spans, and why.
- **Flush points.** Each writer batch is one durable ``Store.flush``, started as soon as a
  step arrives. ``force_flush()`` returns once everything handed over before it is durable;
  so does ``export()`` while the writer keeps up, which makes ``TracerProvider.force_flush()``
  (the batch processor turns it into ``export()`` calls, never into ``force_flush()``) a
  durability point too. Under overload ``export()`` does not wait, so the batch processor
  never backs up and drops because of it. ``shutdown()`` (run by the SDK at exit) writes
  everything, including steps whose span another instrumentation has not ended yet, and
  closes the store.
- **Exit.** A remote store's client (s3fs) stops working once the interpreter has begun to
  stop its thread pools, before ``atexit`` runs. So at exit the exporter writes what it holds
  earlier, from a threading exit hook (``otel_replay._exit``), after the capture has ended the
  process run and its root span; when no other thread may still record it also closes the
  store then. What comes later (another thread's steps, the application's exit hooks) is
  written by the ``atexit`` hooks and ``shutdown()``, which open the store again if need be.
- **SIGTERM.** Python dies of SIGTERM without running ``atexit``, so the exporter installs a
  handler (``OTEL_REPLAY_HANDLE_SIGTERM=false`` turns it off) that writes everything held and
  then chains to the previous handler; when the signal would kill the process, it also ends
  the process run's root span and the open ``run()`` spans, flushes the tracer providers (so
  OTLP sends its last batch) and re-raises the signal with the default disposition: the exit
  status is unchanged. See :mod:`._sigterm`. SIGKILL cannot be handled: what was flushed
  before it is intact (the store's crash safety); steps not yet written (at most the last
  ``GATHER_S`` of them) and a step in flight are absent.
- **Worker processes.** A forked child starts with an empty hand-off and a writer and store
  of its own; the parent writes what it held. The child's store writes into the parent's
  recording (each process into files of its own), so the runs it continues stay one run; a
  worker multiprocessing starts fresh (spawn, forkserver) joins it through its ticket
  (``otel_replay._workers``). A multiprocessing worker, which leaves through ``os._exit``,
  writes what it holds at its end.
"""

from otel_replay.export.exporter import ExporterStats, ReplaySpanExporter

__all__ = ["ExporterStats", "ReplaySpanExporter"]
