"""Replay mode inside the replayed process (``OTEL_REPLAY_MODE=replay``): :func:`bootstrap`
and :func:`start`."""

from __future__ import annotations

import atexit
import os
import sys
from types import TracebackType
from typing import NoReturn

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_replay import settings
from otel_replay.errors import OtelReplayError, RecordedValueError
from otel_replay.redact import Redactor
from otel_replay.replay._fork import ForkPlan
from otel_replay.replay._install import install
from otel_replay.replay._session import ReplaySession
from otel_replay.replay._world import World
from otel_replay.runs import use_fork, use_parent_run, use_recorded_seed
from otel_replay.settings import Settings

__all__ = ["bootstrap", "refuse_to_replay", "start_replay"]

_session: ReplaySession | None = None


def refuse_to_replay(message: str) -> NoReturn:
    """Say on one line why this process cannot replay, and exit with status 2 at once."""
    sys.stderr.write(f"otel-replay: cannot replay: {message}\n")
    sys.stderr.flush()
    os._exit(2)


def start_replay(config: Settings) -> ReplaySession:
    """Serve this process's HTTP from the run ``OTEL_REPLAY_RUN`` names (once per process)."""
    global _session  # noqa: PLW0603 - one replay per process
    if _session is not None:
        return _session
    if not config.run:
        refuse_to_replay("OTEL_REPLAY_MODE=replay needs OTEL_REPLAY_RUN (a run id, file or URL)")
    from otel_replay.replay.sources import load_run  # noqa: PLC0415 - import cycle

    try:
        run = load_run(config.run or "", store=config.store)
        plan = ForkPlan.read(config.fork) if config.fork else None
        fork = plan.check(run, live_read_tools=config.live_read_tools) if plan else None
        # Unbuffered, for appending: each event is one write, whichever process makes it.
        report = open(config.report, "ab", buffering=0) if config.report else None  # noqa: SIM115
    except (OtelReplayError, OSError) as exc:
        refuse_to_replay(str(exc))
    session = ReplaySession(
        run,
        strict=config.strict,
        timing=config.timing,
        redactor=Redactor(config.redact),
        report=report,
        live_read_tools=config.live_read_tools,
        ignore=config.ignore,
        fork=fork,
    )
    install(session)
    world = World(run.start_ns, config.clock, config.timing)
    world.start()  # for the process's life
    session.reached = world.reach
    if session.live_from is not None:
        session.live_from.on_live(world.go_live)
    use_recorded_seed(run.seed)
    use_parent_run(run.run_id)  # this execution is recorded as a replay of that run
    if fork is not None and not fork.empty:
        use_fork(fork.fork_step(run))
    atexit.register(session.close)
    _report_uncaught(session, said_by_the_verb=report is not None)
    _session = session
    return session


def _report_uncaught(session: ReplaySession, *, said_by_the_verb: bool) -> None:
    """Tell the report which exception ends the program, if one does, so the replay can say
    "the agent raised X" rather than only "exited with status 1"; the hook in place (Python's
    traceback, or the program's own) still runs. But for a recorded value the replay could
    not give back, Python's traceback through the program's code is not printed: the
    recording is at fault, and that is one line (the ``replay`` verb's, ``said_by_the_verb``,
    or this process's own)."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        try:
            session.uncaught(exc)
        finally:
            if not isinstance(exc, RecordedValueError) or previous is not sys.__excepthook__:
                previous(kind, exc, tb)
            elif not said_by_the_verb:
                sys.stderr.write(f"otel-replay: cannot replay: {_escaped(str(exc))}\n")

    sys.excepthook = hook


def _escaped(text: str) -> str:
    """``text`` with what a terminal would act on escaped: a recorded run id is data."""
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)


def bootstrap() -> None:
    """Set up tracing (unless something already did), start the replay, then the capture,
    when ``OTEL_REPLAY_MODE=replay``."""
    try:
        config = settings.load()
    except OtelReplayError as exc:
        refuse_to_replay(str(exc))
    if config.mode != "replay":
        return
    # Only a replayed process records through these; importing them is for here alone.
    from otel_replay.capture.instrumentor import ReplayInstrumentor  # noqa: PLC0415
    from otel_replay.export import ReplaySpanExporter  # noqa: PLC0415
    from otel_replay.store import Store  # noqa: PLC0415

    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        provider = TracerProvider()
        # A read-only store (a CI cache, a shared volume) serves the replay but cannot take
        # its recording; the report says it was not recorded.
        if not Store.is_read_only(config.store):
            provider.add_span_processor(BatchSpanProcessor(ReplaySpanExporter()))
        trace.set_tracer_provider(provider)
    # After the provider: exit hooks run last first, so the session's closing event (its
    # elapsed time) comes before the provider's final flush.
    start_replay(config)
    ReplayInstrumentor().instrument()
