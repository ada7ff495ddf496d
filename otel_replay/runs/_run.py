"""Runs: which run a step belongs to, its step counter, and the ``run()`` context manager."""

from __future__ import annotations

import os
import random
import secrets
import sys
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Tracer

from otel_replay import attributes as A
from otel_replay import settings
from otel_replay._clock import wall_gmtime, wall_ns
from otel_replay.errors import ConfigError
from otel_replay.runs._counter import StepCounter
from otel_replay.runs._failed import Failure, mark_failed
from otel_replay.runs._vcs import code_version
from otel_replay.step import RunEnd, RunFacts

if TYPE_CHECKING:
    from otel_replay.runs._handoff import Handoff

__all__ = [
    "BLOCK_RUN",
    "RUN_FACTS",
    "RunState",
    "continue_run",
    "current_run",
    "end_process_run",
    "in_run_block",
    "new_run_id",
    "on_process_run_change",
    "process_run",
    "qualified_name",
    "recording",
    "run",
    "seed_process",
    "separate",
    "start_process_run",
    "tracer_in_use",
    "use_fork",
    "use_parent_run",
    "use_recorded_seed",
    "use_tracer",
]

RUN_FACTS = frozenset({A.REPLAY_SEED, "vcs.ref.head.revision", A.REPLAY_CODE_DIRTY})
"""The run's facts that are the same for all its steps: its own span carries them (the
``run()`` block's, or the process run's root), not each step's span, unless a step is made
under no span of the run. Readers take them from the run's span first, then from any."""

_TRACER_NAME = "otel_replay"
_tracer: Tracer | None = None
_root_span_enders: list[Callable[[], None]] = []


def on_process_run_change(end_root_span: Callable[[], None]) -> None:
    """Have ``end_root_span`` called when the process run changes or the tracer goes
    (``_process_trace``, which builds on this module, ends its root span so)."""
    _root_span_enders.append(end_root_span)


def _end_root_span() -> None:
    for end in _root_span_enders:
        end()


def use_tracer(tracer: Tracer | None) -> None:
    """Make ``run()`` open its spans with ``tracer`` (the instrumentor's), or the global
    provider's when None; None (the instrumentor going) also ends the process run's root span
    (``_process_trace``)."""
    global _tracer  # noqa: PLW0603 - set by the instrumentor, read by run()
    if tracer is None and _tracer is not None:
        _end_root_span()
    _tracer = tracer


def new_run_id() -> str:
    """A fresh, time-sortable run id such as ``r_20261121T172100_3f9a2c1b``."""
    return time.strftime("r_%Y%m%dT%H%M%S_", wall_gmtime()) + secrets.token_hex(4)


@dataclass(slots=True)
class RunState:
    """One run: its id, seed, mode, start (Unix nanoseconds) and step counter."""

    run_id: str
    mode: str = "record"
    seed: int | None = None
    start_ns: int = field(default_factory=wall_ns)
    # While replaying, every run recorded is a replay of the run being replayed.
    parent_run_id: str | None = field(default_factory=lambda: _parent_run)
    # In a fork, the first step that did not come from the recording (replay.fork.step).
    fork_step: int | None = field(default_factory=lambda: _fork_step)
    _facts: RunFacts | None = field(default=None, repr=False, compare=False)
    _attrs: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    _step_attrs: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    counter: StepCounter = field(init=False, repr=False, compare=False)
    span_id: int | None = field(default=None, repr=False, compare=False)
    """The span id of the run's ``run()`` block span, which its steps name
    (``replay.run.span_id``); None for the process run (each burst has a root of its own)."""

    def __post_init__(self) -> None:
        self.counter = StepCounter(self.run_id)

    def next_step(self) -> int:
        """The next ``replay.step.index``; safe across threads, and across the worker
        processes that continue the run."""
        return self.counter.next()

    def step_after(self, index: int) -> int | None:
        """The index of the step this thread or task made last in this run before step
        ``index`` (``replay.step.after``; None: its first), and ``index`` its last from now."""
        last = _LAST_STEP.get()
        _LAST_STEP.set((self.run_id, index))
        return last[1] if last is not None and last[0] == self.run_id else None

    @property
    def inherited(self) -> bool:
        """This process continues a run another process began (it is a worker that process
        forked or started), which that process ends."""
        return self.counter.inherited

    def facts(self) -> RunFacts:
        """The run's facts, carried by each of its steps (the same object every time).

        Built on first use: a run's id, mode, seed and start do not change once it has steps.
        """
        facts = self._facts
        if facts is None:
            version = code_version()
            facts = self._facts = RunFacts(
                run_id=self.run_id,
                mode=self.mode,
                seed=self.seed,
                commit=version.revision,
                code_dirty=version.dirty,
                start_ns=self.start_ns,
                parent_run_id=self.parent_run_id,
            )
        return facts

    def attributes(self) -> dict[str, Any]:
        """The run's replay kit, as the run's own span carries it (a fresh dict)."""
        if self._attrs is None:
            self._attrs = self._build_attributes()
        return self._attrs.copy()

    def step_attributes(self) -> dict[str, Any]:
        """The run's kit as a step's span carries it (a fresh dict): without the facts of
        :data:`RUN_FACTS`, which the run's own span carries. A step that ends up under no
        span of the run gets them back from the step tracer (``_process_trace``)."""
        attrs = self._step_attrs
        if attrs is None:
            attrs = self._step_attrs = {
                k: v for k, v in self.attributes().items() if k not in RUN_FACTS
            }
        return attrs.copy()

    def fact_attributes(self) -> dict[str, Any]:
        """The attributes of :data:`RUN_FACTS` the run has (a fresh dict)."""
        return {k: v for k, v in self.attributes().items() if k in RUN_FACTS}

    def _build_attributes(self) -> dict[str, Any]:
        facts = self.facts()
        attrs: dict[str, Any] = {A.REPLAY_RUN_ID: self.run_id, A.REPLAY_MODE: self.mode}
        if facts.seed is not None:
            attrs[A.REPLAY_SEED] = facts.seed
        if facts.commit is not None:
            attrs["vcs.ref.head.revision"] = facts.commit
        if facts.code_dirty is not None:
            attrs[A.REPLAY_CODE_DIRTY] = facts.code_dirty
        if facts.parent_run_id is not None:
            attrs[A.REPLAY_PARENT_RUN_ID] = facts.parent_run_id
        if self.mode == "fork" and self.fork_step is not None:
            attrs[A.REPLAY_FORK_STEP] = self.fork_step
        if self.span_id is not None:
            attrs[A.REPLAY_RUN_SPAN_ID] = f"{self.span_id:016x}"
        return attrs

    def use_span(self, span: Span) -> None:
        """Make ``span`` (a ``run()`` block's, started) the run's own span, which its steps'
        attributes name from now on."""
        self.span_id = span.get_span_context().span_id
        self._attrs = self._step_attrs = None


_process_run: RunState | None = None
_recorded_seed: int | None = None
_process_seed: int | None = None
"""The seed :func:`seed_process` applied, until the process run that it seeds takes it."""
BLOCK_RUN: ContextVar[RunState | None] = ContextVar("otel_replay_run", default=None)
"""The run of the innermost ``run()`` block of the calling context (None: in no block)."""
_LAST_STEP: ContextVar[tuple[str, int] | None] = ContextVar("otel_replay_last_step", default=None)
"""(run id, step index) of the step this thread or task made last (``RunState.step_after``)."""


def start_process_run(run_id: str | None = None) -> RunState:
    """Begin a new process-wide run (id from ``run_id``, ``OTEL_REPLAY_RUN_ID`` or generated);
    steps outside any ``run()`` block belong to it from now on."""
    global _process_run  # noqa: PLW0603 - one process-wide default run
    if _process_run is not None and _tracer is not None:
        _end_root_span()  # the run it was the root of is over
    global _process_seed  # noqa: PLW0603 - handed to the first process run only
    mode = settings.read("OTEL_REPLAY_MODE")
    _process_run = RunState(
        run_id=run_id or _claim_configured_id() or new_run_id(),
        mode="fork" if _forking and mode == "replay" else mode,
        seed=_process_seed,
    )
    _process_seed = None  # a later process run starts where this one left ``random``
    return _process_run


def seed_process() -> None:
    """Seed ``random`` (and numpy, if imported) for the process run, at instrumentation:
    before the program's first draw, which may come before its first step. The seed is
    drawn (under replay: the recorded one) and recorded by the process run, begun already
    without a step or the next one begun; a ``run()`` block seeds its own. Nothing when the
    process run has made steps: seeding it now would be seeding it halfway."""
    global _process_seed  # noqa: PLW0603 - handed to the next process run begun
    state = _process_run
    if state is not None and (state.counter.peek() or state._facts is not None):
        return
    seed = _drawn_seed()
    _seed_everything(seed)
    if state is None:
        _process_seed = seed
    else:
        state.seed = seed


def process_run() -> RunState:
    """The process run (begun now if it was not yet): steps outside any ``run()`` block."""
    return _process_run if _process_run is not None else start_process_run()


def continue_run(state: RunState) -> None:
    """Make ``state``, a run another process began (a worker's parent), this process's run:
    its steps outside any ``run()`` block belong to it, and ``OTEL_REPLAY_RUN_ID`` is the
    other process's to claim, not this one's."""
    global _process_run, _configured_id_claimed  # noqa: PLW0603 - the process run
    if _process_run is not None and _tracer is not None:
        _end_root_span()
    _process_run = state
    _configured_id_claimed = True


def recording() -> bool:
    """True while the instrumentor records (its tracer is set)."""
    return _tracer is not None


def tracer_in_use() -> Tracer | None:
    """The tracer ``run()`` blocks and steps start their spans with (None: not recording)."""
    return _tracer


_ended: tuple[str, int] | None = None
"""The process run and its step count when its end was handed over."""


def end_process_run(error_type: str | None) -> None:
    """Hand the exporter the process run's end (at exit), with how the application failed
    (``error_type``; None: it did not). Nothing for a run that made no step (in this process
    or in a worker), nor for a run this process inherited (its parent ends it), nor again
    for a run ended already unless it made steps since (the exit's two passes, ``_exit``)."""
    global _ended  # noqa: PLW0603 - the process run's end
    state = _process_run
    if state is None or state.mode == "off" or state.inherited:
        return
    made = state.counter.peek()
    if made == 0 or _ended == (state.run_id, made):
        return
    _ended = (state.run_id, made)
    _handoff().post(RunEnd(state.run_id, wall_ns(), error_type))


_configured_id_claimed = False


def _claim_configured_id() -> str | None:
    """``OTEL_REPLAY_RUN_ID``, handed out once: to the first top-level ``run()`` block or to
    the process run, whichever records first, so no two runs share an id."""
    global _configured_id_claimed  # noqa: PLW0603 - one claim per process
    if _configured_id_claimed:
        return None
    run_id: str | None = settings.read("OTEL_REPLAY_RUN_ID")
    _configured_id_claimed = run_id is not None
    return run_id


def current_run() -> RunState:
    """The run of the calling context: the innermost ``run()`` block, else the process run."""
    state = BLOCK_RUN.get()
    if state is not None:
        return state
    return _process_run if _process_run is not None else start_process_run()


def in_run_block() -> bool:
    """True when the calling context is inside a ``run()`` block (else its steps belong to
    the process run)."""
    return BLOCK_RUN.get() is not None


_parent_run: str | None = None


def use_parent_run(run_id: str | None) -> None:
    """While replaying: the id of the run being replayed, which every run recorded from now
    on names as its parent (``replay.parent.run.id``); None: runs are recordings again."""
    global _parent_run  # noqa: PLW0603 - set by the replay, read when a run starts
    _parent_run = run_id


_forking = False
_fork_step: int | None = None


def use_fork(fork_step: int | None) -> None:
    """While replaying a fork: every run recorded from now on is a fork (``replay.mode``
    ``fork``) whose first step not from the recording is ``fork_step`` (``replay.fork.step``;
    None when no recorded step is changed)."""
    global _forking, _fork_step  # set by the replay, read when a run starts
    _forking, _fork_step = True, fork_step


def use_recorded_seed(seed: int | None) -> None:
    """While replaying: the seed the recording drew, given to every ``run()`` that does not
    pass its own, so the code's randomness repeats (None: draw seeds again)."""
    global _recorded_seed  # noqa: PLW0603 - set by the replay, read by run()
    _recorded_seed = seed


def _handoff() -> Handoff:
    """The process's hand-off, imported on first use: the process that only names runs (the
    CLI minting a replay's id) does not load the OpenTelemetry SDK the hand-off builds on."""
    from otel_replay.runs._handoff import handoff  # noqa: PLC0415

    return handoff()


def qualified_name(exc: BaseException) -> str:
    """The ``error_type`` recorded for ``exc``: its class's qualified name, prefixed with its
    module unless it is a builtin."""
    cls = type(exc)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def _seed_everything(seed: int) -> None:
    separate()  # OpenTelemetry's ids must not repeat with the application's randomness
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % 2**32)


def _drawn_seed() -> int:
    return _recorded_seed if _recorded_seed is not None else secrets.randbits(31)


class run:
    """Open a new run for the enclosed block, sync (``with``) or async (``async with``).

    ``name`` becomes ``gen_ai.agent.name`` on the ``invoke_agent {name}`` span that parents
    every step of the run. ``seed`` seeds ``random`` (and numpy if imported); when omitted a
    seed is drawn and recorded (under replay, the recorded seed is used). The run id comes
    from ``run_id``, else ``OTEL_REPLAY_RUN_ID`` for the first top-level block, else it is
    generated. The block's exception marks the span as the run's failure and propagates
    unchanged; a recorded block's exit hands the exporter a :class:`~otel_replay.step.RunEnd`.

    When otel-replay is not instrumenting (disabled, or ``OTEL_REPLAY_MODE=off``) the block
    still opens a plain ``invoke_agent`` span, without the replay kit.
    """

    def __init__(self, name: str, seed: int | None = None, run_id: str | None = None) -> None:
        if run_id is not None:
            given = run_id
            try:
                run_id = settings.run_id_given(given)
            except ValueError as exc:
                raise ConfigError(f"run(run_id={given[:200]!r}) is invalid: {exc}") from None
        self.name = name
        self._explicit_seed = seed is not None
        recording = _tracer is not None
        if run_id is None and BLOCK_RUN.get() is None and recording:
            run_id = _claim_configured_id()
        self.state = RunState(
            run_id=run_id or new_run_id(),
            mode=current_run().mode if recording else "off",
            seed=seed if seed is not None else _drawn_seed(),
        )
        self._span: Span | None = None
        self._tokens: tuple[Token[RunState | None], object] | None = None

    @property
    def run_id(self) -> str:
        """The id of the run this block records."""
        return self.state.run_id

    @property
    def seed(self) -> int:
        """The seed injected into ``random`` for this run."""
        assert self.state.seed is not None
        return self.state.seed

    def __enter__(self) -> run:
        recording = _tracer is not None
        self.state.start_ns = wall_ns()
        attrs = self.state.attributes() if recording else {}
        attrs["gen_ai.operation.name"] = "invoke_agent"
        attrs["gen_ai.agent.name"] = self.name
        tracer = _tracer or trace.get_tracer(_TRACER_NAME)
        self._span = tracer.start_span(
            f"invoke_agent {self.name}", kind=SpanKind.INTERNAL, attributes=attrs
        )
        if recording:
            self.state.use_span(self._span)
        run_token = BLOCK_RUN.set(self.state)
        ctx_token = otel_context.attach(trace.set_span_in_context(self._span))
        self._tokens = (run_token, ctx_token)
        # Without recording, a drawn seed would be recorded nowhere: only an explicit or a
        # replayed one is applied, because then the caller asked for that determinism.
        if recording or self._explicit_seed or _recorded_seed is not None:
            _seed_everything(self.seed)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._span is not None and self._tokens is not None
        run_token, ctx_token = self._tokens
        otel_context.detach(ctx_token)  # type: ignore[arg-type]
        BLOCK_RUN.reset(run_token)
        if exc is not None:
            recording = self.state.mode != "off"
            mark_failed(self._span, Failure(qualified_name(exc), exc), kit=recording)
        self._span.end()
        if self.state.mode != "off" and not self.state.inherited:
            # Queued behind every step the block handed off (a stream the block left open
            # ends later), so the exporter sees the end after the steps.
            end = RunEnd(self.run_id, wall_ns(), None if exc is None else qualified_name(exc))
            _handoff().post(end)

    async def __aenter__(self) -> run:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)


_own = random.Random()
_lock = threading.Lock()
_done = False


def separate() -> None:
    """Have the SDK's ``RandomIdGenerator`` draw from a generator of its own (once)."""
    global _done  # noqa: PLW0603 - once per process
    with _lock:
        if _done:
            return
        from opentelemetry.sdk.trace import id_generator  # noqa: PLC0415 - the SDK's

        # It calls ``random.getrandbits``: the name it reads is the module's global.
        if getattr(id_generator, "random", None) is random:
            setattr(id_generator, "random", _own)  # noqa: B010 - not exported, but read
        _done = True


os.register_at_fork(after_in_child=_own.seed)
