"""The process run's trace: one root span per burst of work, under which its steps outside
any span nest."""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
)
from opentelemetry.util.types import Attributes

from otel_replay import attributes as A
from otel_replay import settings
from otel_replay._clock import wall_ns
from otel_replay._shared import SharedCells
from otel_replay._workers import at_worker_exit
from otel_replay.runs._counter import allocate_cell
from otel_replay.runs._failed import Failure, mark_failed
from otel_replay.runs._run import (
    RunState,
    current_run,
    end_process_run,
    in_run_block,
    on_process_run_change,
    qualified_name,
    tracer_in_use,
)

__all__ = [
    "IDLE_GAP_NS",
    "Borrowed",
    "StepTracer",
    "adopt_root",
    "borrow",
    "cut_off",
    "end_at_exit",
    "end_process_trace",
    "exit_flush",
    "exiting",
    "failure",
    "open_for_workers",
    "unwatch",
    "watch",
]

_EXIT_FLUSH_MS = 5000  # when OTEL_REPLAY_FLUSH_TIMEOUT_MS does not parse

IDLE_GAP_NS = 300 * 10**9
"""Idle time after which a process run's next step opens a new trace (as a trace source's
model calls are split into runs)."""


@dataclass(slots=True)
class _Burst:
    """The open root span of a process run and the steps started under it.

    ``root`` is None for a burst borrowed from the parent process (its root is the parent's
    to end). ``used``, for a root opened for worker processes, is the cell that their first
    step under it marks: such a root is ended only if a step was made under it, here
    (``stepped``) or in a worker. ``inherited``: the run is another process's (this one is
    its worker), so how this process ends is not how the run ends. ``kit``: the run's kit,
    not yet on a root that another instrumentation's span opened (see :func:`adopt_root`);
    it goes on with the first step made under it, so a root under which no step was made
    belongs to no run and the store never sees it."""

    run_id: str
    root: Span | None
    context: Context
    start_ns: int
    last_end_ns: int
    open: list[Span] = field(default_factory=list)
    used: tuple[SharedCells, int] | None = None
    stepped: bool = False
    marked: bool = False
    """This process has marked ``used``: it made a step under the root."""
    inherited: bool = False
    kit: dict[str, Any] | None = None

    def mark_used(self) -> None:
        """A step was made under the root: mark ``used`` (once per process)."""
        if self.used is not None and not self.marked:
            cells, cell = self.used
            cells.add(cell)  # a worker's step: the parent's root is used
            self.marked = True

    def take_kit(self) -> None:
        """Put the run's kit on the root now, if it is not there yet."""
        kit, self.kit = self.kit, None
        if kit is not None and self.root is not None:
            self.root.set_attributes(kit)

    def borrowed(self) -> Borrowed:
        """What a worker started now borrows of this burst."""
        return Borrowed(trace.get_current_span(self.context).get_span_context(), self.used)

    def settle(self) -> bool:
        """Forget the steps that ended (their ends move ``last_end_ns``); True when none is
        still open."""
        still = []
        for span in self.open:
            end = getattr(span, "end_time", None)
            if isinstance(end, int):
                self.last_end_ns = max(self.last_end_ns, end)
            elif span.is_recording():
                still.append(span)
        self.open = still
        return not still


class _ProcessTrace:
    """The process run's current burst; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._burst: _Burst | None = None
        # The spans of the run() blocks still open, which only a cut-off ends for them.
        self._blocks: weakref.WeakSet[Span] = weakref.WeakSet()

    def parent(self, tracer: Tracer, start_ns: int | None, step: bool = True) -> _Burst | None:
        """The burst a step starting now (or at ``start_ns``) nests under, opened if need be
        (by another instrumentation's span, not a ``step``: without the run's kit); None when
        the step has a parent of its own or belongs to a ``run()`` block."""
        if trace.get_current_span().get_span_context().is_valid:
            return None
        if in_run_block():
            return None
        run = current_run()
        now = start_ns if start_ns is not None else wall_ns()
        ended = None
        with self._lock:
            burst = self._burst
            if burst is not None and (
                burst.run_id != run.run_id
                or (burst.settle() and now - burst.last_end_ns > IDLE_GAP_NS)
            ):
                ended, burst = burst, None
            if burst is None:
                burst = self._burst = _open(tracer, run, now, kit=step)
        if ended is not None:  # outside the lock: ending a span runs the span processors
            _end(ended)
        return burst

    def track(self, burst: _Burst, span: Span, step: bool = True) -> None:
        """Watch ``span``, started under ``burst`` (a ``step``, or another
        instrumentation's span), until it ends."""
        if span.is_recording():
            with self._lock:
                burst.open.append(span)
                if step:
                    burst.mark_used()
                burst.stepped = True
                if step and burst.kit is not None:
                    burst.take_kit()

    def step_within(self, context: Context | None) -> int | None:
        """A step starts under a span of its own (``context``'s, else the current one): when
        that span is in the trace of the process run's root, the root (which takes the run's
        kit now if it has not yet) is the run's span the step was made under: its span id,
        else None."""
        burst = self._burst
        if burst is None:
            return None
        # This process's root, or the one a worker borrowed from its parent.
        root = trace.get_current_span(burst.context).get_span_context()
        if trace.get_current_span(context).get_span_context().trace_id != root.trace_id:
            return None
        if burst.kit is not None or (burst.used is not None and not burst.marked):
            with self._lock:
                burst.take_kit()
                # Made under another instrumentation's span (an SDK's call span) in a worker:
                # the parent's root is used all the same.
                burst.mark_used()
        return root.span_id

    def for_workers(self, tracer: Tracer) -> Borrowed | None:
        """What the steps of workers started now outside any span nest under: the process
        run's burst, opened if need be (see :func:`open_for_workers`)."""
        burst = self.parent(tracer, None)
        if burst is None:
            return None
        with self._lock:
            if burst.used is None and not burst.stepped and burst.root is not None:
                burst.used = allocate_cell()
            burst.take_kit()  # the workers' steps are the run's
            return burst.borrowed()

    def borrow(self, run_id: str, parent: Borrowed) -> None:
        """Nest the steps of ``run_id`` made outside any span under ``parent`` (of the
        process that started this one) until this process goes idle."""
        now = wall_ns()
        context = trace.set_span_in_context(NonRecordingSpan(parent.span), Context())
        with self._lock:
            self._burst = _Burst(run_id, None, context, now, now, used=parent.used)

    def block(self, span: Span) -> None:
        """Watch ``span``, a ``run()`` block's, until it ends."""
        if span.is_recording():
            with self._lock:
                self._blocks.add(span)

    def end(
        self, cause: str | None = None, steps_cut: bool = False, failed: Failure | None = None
    ) -> None:
        """End the current burst's root span, if there is one (as ``failed``, when the
        application failed so); with a ``cause`` (the process is being cut off), also the
        ``run()`` blocks' spans still open (see :func:`cut_off`)."""
        with self._lock:
            burst, self._burst = self._burst, None
            blocks = [span for span in self._blocks if span.is_recording()] if cause else []
        if burst is not None:
            _end(burst, cause, steps_cut, failed)
        # Innermost first, as the blocks would have exited.
        for span in sorted(blocks, key=_start_of, reverse=True):
            _cut(span, cause or "")
            span.end()

    def forget(self) -> None:
        """In a forked child: the parent ends its root, under which the child's steps nest
        until the child goes idle (then they open roots of their own)."""
        burst = self._burst
        if burst is not None:
            now = wall_ns()
            burst = _Burst(burst.run_id, None, burst.context, now, now, used=burst.used)
        self._burst = burst
        self._lock = threading.Lock()


_PROCESS = _ProcessTrace()


def _after_fork_in_child() -> None:
    _PROCESS.forget()
    at_worker_exit(_PROCESS, lambda _: _end_at_exit(), WORKER_EXIT_PRIORITY)
    # Last, once the exporters' writers have the store's part: a worker leaves through
    # os._exit, so the SDK's shutdown never sends what the other processors (OTLP's) hold.
    at_worker_exit(_PROCESS, lambda _: _flush_the_others(), WORKER_EXIT_PRIORITY - 15)


os.register_at_fork(after_in_child=_after_fork_in_child)

WORKER_EXIT_PRIORITY = 20
"""When a multiprocessing worker ends: the root span ends and the processors feeding the store
flush before the exporters' writers do (``export.exporter``)."""


def _program() -> str:
    """What names the process run's root span: the script (``agent.py``), the package run
    with ``-m`` (``pytest``), else ``python``."""
    argv0 = sys.argv[0] if sys.argv else ""
    if argv0 in ("", "-c", "-m"):
        return "python"
    path = Path(argv0)
    return path.parent.name if path.name == "__main__.py" and path.parent.name else path.name


def _open(tracer: Tracer, run: RunState, start_ns: int, kit: bool = True) -> _Burst:
    name = _program()
    attrs = run.attributes() if kit else {}
    attrs["gen_ai.operation.name"] = "invoke_agent"
    attrs["gen_ai.agent.name"] = name
    root = tracer.start_span(
        f"invoke_agent {name}",
        context=Context(),  # a root: whatever is current belongs to the application
        kind=SpanKind.INTERNAL,
        attributes=attrs,
        start_time=start_ns,
    )
    context = trace.set_span_in_context(root, Context())
    burst = _Burst(run.run_id, root, context, start_ns, start_ns, inherited=run.inherited)
    burst.kit = None if kit else run.attributes()
    return burst


def _end(
    burst: _Burst,
    cause: str | None = None,
    steps_cut: bool = False,
    failed: Failure | None = None,
) -> None:
    """End ``burst``'s root where its last step ended (now, if a step is still open: with a
    ``cause``, that step, like ``steps_cut``, was cut off, which makes the burst an error;
    ``failed``: the application failed, which makes it one unless the run is inherited).
    A borrowed burst's root is not this process's to end; a root opened for workers under
    which no process made a step is left unended (it is never exported)."""
    root = burst.root
    if root is None:
        return
    workers = False
    if burst.used is not None and not burst.stepped:
        cells, cell = burst.used
        if not cells.get(cell):
            return
        workers = True  # whose steps' ends this process does not see: it ends now
    done = burst.settle()
    if cause and (steps_cut or not done):
        _cut(root, cause)
    elif failed is not None and not burst.inherited:
        mark_failed(root, failed, kit=burst.kit is None)
    ended = max(burst.last_end_ns, burst.start_ns) if done and not workers else wall_ns()
    root.end(end_time=ended)


def _cut(span: Span, cause: str) -> None:
    span.set_attribute("error.type", cause)
    span.set_status(Status(StatusCode.ERROR, f"cut off by {cause}"))


def _start_of(span: Span) -> int:
    start = getattr(span, "start_time", None)
    return start if isinstance(start, int) else 0


def end_process_trace() -> None:
    """End the process run's current root span (at exit, when the instrumentor goes, or when
    the process run changes)."""
    _PROCESS.end()


on_process_run_change(end_process_trace)


@dataclass(frozen=True, slots=True)
class Borrowed:
    """What a worker's steps made outside any span nest under: a span of the process that
    started it, and the cell its first step there marks (the parent ends that span only if
    someone made a step under it; None: it ends it anyway)."""

    span: SpanContext
    used: tuple[SharedCells, int] | None = None


def open_for_workers() -> Borrowed | None:
    """What the steps of worker processes started now (from the calling thread) nest under,
    when no span is current there: the process run's root span, opened now if need be (one
    opened so is ended only if a step is made under it). None when a span is current (the
    workers inherit it), or when not recording."""
    tracer = tracer_in_use()
    if tracer is None or trace.get_current_span().get_span_context().is_valid:
        return None
    inner = tracer.inner if isinstance(tracer, StepTracer) else tracer
    return _PROCESS.for_workers(inner)


def borrow(run_id: str, parent: Borrowed) -> None:
    """In a worker started fresh: nest the steps of ``run_id`` (its process run, its
    parent's) made outside any span under ``parent``, until the worker goes idle."""
    _PROCESS.borrow(run_id, parent)


_exiting = False


def exiting() -> bool:
    """Whether the process has begun its exit flush (at exit, or at a multiprocessing
    worker's end): the root span is ended and the processors feeding the store are being
    flushed, on the thread that is exiting."""
    return _exiting


def _end_at_exit() -> None:
    """At exit, before the SDK's providers shut down: end the root span and push it into the
    store. The providers shut their processors down one after the other, OTLP's usually
    first, which may wait on a collector for its whole timeout; a process killed meanwhile
    would otherwise never store its root span."""
    exit_flush(final=True)


def exit_flush(*, final: bool) -> None:
    """Push every ended span into the processors that feed the store; ``final``: end the
    process run's root span first (nothing more will be recorded)."""
    global _exiting  # noqa: PLW0603 - set once: the process is on its way out
    if final:
        _exiting = True
        _PROCESS.end(failed=failure())
    timeout_ms = _flush_timeout_ms()
    for processor, flush in _span_processors():
        if _feeds_the_store(processor):
            flush(timeout_ms)


def _flush_the_others() -> None:
    """Push what the span processors that do not feed the store hold to their exporters
    (an OTLP collector), all within one flush timeout."""
    deadline = time.monotonic() + _flush_timeout_ms() / 1000
    for processor, flush in _span_processors():
        if not _feeds_the_store(processor):
            flush(max(0, int((deadline - time.monotonic()) * 1000)))


def _flush_timeout_ms() -> int:
    try:
        return int(settings.read("OTEL_REPLAY_FLUSH_TIMEOUT_MS"))
    except Exception:  # a bad value is reported where the exporter reads it
        return _EXIT_FLUSH_MS


_TRACERS: weakref.WeakSet[StepTracer] = weakref.WeakSet()


def cut_off(cause: str, timeout_s: float, steps_cut: bool = False) -> bool:
    """The process is about to die of ``cause`` (``SIGTERM``) without running its exit hooks:
    end what an exit would have ended, then push every ended span out of the tracer
    providers the instrumentor records through (their batch processors send their last batch
    to every exporter, OTLP's too). True when every provider flushed within ``timeout_s``.

    Ended: the process run's root span (where its last step ended; a step still in flight,
    or ``steps_cut``, steps that were and that the caller ended as cut off, make it an error,
    ``error.type`` ``cause``), and the spans of the ``run()`` blocks still open (errors too:
    the block did not finish). A run's own end is not handed over: a run
    cut off stays ``incomplete`` in the store. Call it from a thread that holds no lock of
    the application's (the SIGTERM handler runs it on a helper thread).
    """
    _PROCESS.end(cause, steps_cut)
    deadline = time.monotonic() + timeout_s
    ok = True
    for flush in _provider_flushes():
        left_ms = max(0, int((deadline - time.monotonic()) * 1000))
        ok = bool(flush(left_ms)) and ok
    return ok


def _provider_flushes() -> list[Any]:
    """The ``force_flush`` of each span processor of the SDK tracer providers a
    :class:`StepTracer` records through, else of the global provider; the replay exporter's
    processors first.

    A provider's own ``force_flush`` flushes its processors one after the other within one
    deadline, so an OTLP exporter waiting on a collector that does not answer would use it
    all up and the replay exporter's last batch (the root span) would never reach the store.
    Each processor is flushed on its own instead, ours first."""
    found = _span_processors()
    if not found:
        provider = trace.get_tracer_provider()
        flush = getattr(provider, "force_flush", None)
        return [] if flush is None else [flush]
    ordered = sorted(found, key=lambda pair: not _feeds_the_store(pair[0]))
    return [flush for _, flush in ordered]


def _span_processors() -> list[tuple[Any, Any]]:
    """Each span processor (with its ``force_flush``) of the SDK tracer providers a
    :class:`StepTracer` records through (an SDK tracer shares its provider's processor)."""
    found: dict[int, tuple[Any, Any]] = {}
    for tracer in list(_TRACERS):
        processor = getattr(tracer.inner, "span_processor", None)
        for each in getattr(processor, "_span_processors", None) or (processor,):
            flush = getattr(each, "force_flush", None)
            if flush is not None:
                found.setdefault(id(each), (each, flush))
    return list(found.values())


def _feeds_the_store(processor: Any) -> bool:
    """True for a span processor (a batch or simple one) exporting to a replay exporter."""
    exporter = getattr(processor, "span_exporter", None)
    return hasattr(exporter, "_flush_on_signal")


class StepTracer(Tracer):
    """The instrumentor's tracer: a step span (one with ``replay.step.index``) started with no
    explicit parent, no span current and outside any ``run()`` block is made a child of the
    process run's root span (see the module). Every other span starts as ``inner`` starts it.

    Creating one registers the exit hook that ends the last root span; make it after the
    SDK's tracer providers exist (the instrumentor does), so the hook runs before they flush.
    """

    def __init__(self, inner: Tracer) -> None:
        self.inner = inner
        atexit.unregister(_end_at_exit)
        atexit.register(_end_at_exit)
        _TRACERS.add(self)

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        burst = None
        step = _is_step(attributes)
        run_span = None
        if step and context is None:
            burst = _PROCESS.parent(self.inner, start_time)
            if burst is not None:
                context = burst.context
                run_span = trace.get_current_span(context).get_span_context().span_id
        if step and burst is None:
            run_span = _PROCESS.step_within(context)
        if step and attributes and A.REPLAY_RUN_SPAN_ID not in attributes:
            if run_span is not None:
                # The process run's root this step is made under, which carries the run's
                # facts (a run() block's steps name their block's span already).
                attributes = {**attributes, A.REPLAY_RUN_SPAN_ID: f"{run_span:016x}"}
            else:  # under no span of the run: the step carries the run's facts itself
                attributes = {**attributes, **_facts_of(attributes.get(A.REPLAY_RUN_ID))}
        span = self.inner.start_span(
            name,
            context,
            kind,
            attributes,
            links,
            start_time,
            record_exception,
            set_status_on_exception,
        )
        if burst is not None:
            _PROCESS.track(burst, span)
        elif _is_run_block(attributes):
            _PROCESS.block(span)
        return span

    @contextmanager
    def start_as_current_span(  # type: ignore[override]
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[Span]:
        with self.inner.start_as_current_span(
            name,
            context,
            kind,
            attributes,
            links,
            start_time,
            record_exception,
            set_status_on_exception,
            end_on_exit,
        ) as span:
            yield span


def _facts_of(run_id: object) -> dict[str, Any]:
    """The run facts (``RUN_FACTS``) of run ``run_id``, the calling context's run (a step is
    made in its run's context); none for another run."""
    run = current_run()
    return run.fact_attributes() if run.run_id == run_id else {}


def _is_step(attributes: Mapping[str, Any] | None) -> bool:
    return attributes is not None and A.REPLAY_STEP_INDEX in attributes


def _is_run_block(attributes: Mapping[str, Any] | None) -> bool:
    """A ``run()`` block's ``invoke_agent`` span (it carries the run's kit, not a step's)."""
    return (
        attributes is not None
        and attributes.get("gen_ai.operation.name") == "invoke_agent"
        and A.REPLAY_RUN_ID in attributes
        and A.REPLAY_STEP_INDEX not in attributes
    )


def adopt_root(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The instrumentor's wrapper of the SDK's ``Tracer.start_span``: a GenAI span another
    tracer starts as a root, outside any ``run()`` block, starts under the process run's root
    span instead (see the module). Every other span starts as the SDK starts it."""
    context = args[1] if len(args) > 1 else kwargs.get("context")
    attributes = args[3] if len(args) > 3 else kwargs.get("attributes")
    if not attributes or "gen_ai.operation.name" not in attributes:
        return wrapped(*args, **kwargs)  # the common case: no GenAI span
    tracer = tracer_in_use()
    if not isinstance(tracer, StepTracer) or instance is tracer.inner:
        return wrapped(*args, **kwargs)  # not recording, or a span of ours
    ours = getattr(tracer.inner, "span_processor", None)  # None: not an SDK tracer
    if (
        ours is None
        or getattr(instance, "span_processor", None) is not ours  # another provider's
        or trace.get_current_span(context).get_span_context().is_valid
    ):
        return wrapped(*args, **kwargs)
    start_time = args[5] if len(args) > 5 else kwargs.get("start_time")
    burst = _PROCESS.parent(tracer.inner, start_time, step=False)
    if burst is None:
        return wrapped(*args, **kwargs)
    if len(args) > 1:
        args = (args[0], burst.context, *args[2:])
    else:
        kwargs = {**kwargs, "context": burst.context}
    span = wrapped(*args, **kwargs)
    _PROCESS.track(burst, span, step=False)
    return span


_failure: Failure | None = None
_previous_hook: Any = None
_real_exit: Any = None


def watch() -> None:
    """Start noting how the process ends (once; again after :func:`unwatch`). Register it
    after the SDK's providers exist, so the end is handed over before they flush."""
    global _previous_hook, _real_exit
    if _real_exit is not None:
        return
    _previous_hook, _real_exit = sys.excepthook, sys.exit
    sys.excepthook = _excepthook
    sys.exit = _exit
    atexit.register(end_at_exit)


def unwatch() -> None:
    """Stop: give back ``sys.excepthook`` and ``sys.exit`` (unless replaced since)."""
    global _previous_hook, _real_exit  # noqa: PLW0603 - one watch per process
    if _real_exit is None:
        return
    if sys.excepthook is _excepthook:
        sys.excepthook = _previous_hook
    if sys.exit is _exit:
        sys.exit = _real_exit
    atexit.unregister(end_at_exit)
    _previous_hook = _real_exit = None


def failure() -> Failure | None:
    """How the application failed, once it has (an uncaught exception, a failing
    ``sys.exit`` on the main thread); None while it has not."""
    return _failure


def exit_failure(status: object) -> str | None:
    """What ``sys.exit(status)`` says of the run: None for success (None or 0), else
    ``exit status N`` (a message exits with status 1, as Python does)."""
    if status is None or status == 0:
        return None
    return f"exit status {status if isinstance(status, int) else 1}"


def _excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    global _failure  # noqa: PLW0603 - what ended the process
    _failure = Failure(qualified_name(value), value)
    _previous_hook(kind, value, tb)


def _exit(status: object = None, /) -> NoReturn:
    global _failure  # noqa: PLW0603 - what ended the process
    if threading.current_thread() is threading.main_thread():
        error_type = exit_failure(status)
        _failure = None if error_type is None else Failure(error_type)
    _real_exit(status)
    raise AssertionError("unreachable")  # pragma: no cover - sys.exit raised


def end_at_exit() -> None:
    """Hand over the process run's end, as the application ended (at exit)."""
    end_process_run(None if _failure is None else _failure.error_type)
