"""``otel_replay.replaying``: replay a recorded run inside the current process (for tests)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Literal

from otel_replay import settings
from otel_replay.errors import ConfigError
from otel_replay.redact import Redactor
from otel_replay.replay._fork import ForkPlan
from otel_replay.replay._install import install
from otel_replay.replay._model import Run
from otel_replay.replay._result import AgentStatus, ReplayResult
from otel_replay.replay._session import ReplaySession
from otel_replay.replay._world import World
from otel_replay.runs import use_recorded_seed
from otel_replay.settings import Clock, Timing

__all__ = ["replaying"]


@contextmanager
def replaying(
    run: str | Run,
    *,
    store: str | None = None,
    strict: bool = True,
    timing: Timing = "fast",
    clock: Clock | None = None,
    live_tools: Literal["read"] | None = None,
    override: Mapping[int, object] | Iterable[str] | None = None,
    inject: Mapping[int, str] | Iterable[str] | None = None,
    state: Mapping[str, object] | Iterable[str] | None = None,
    live_from: int | None = None,
    allow_writes: bool = False,
) -> Iterator[ReplayResult]:
    """Serve every httpx/httpx2 request made inside the block from a recorded run.

    ``run`` is a run id in ``store`` (default ``OTEL_REPLAY_STORE``), an OTLP file path, a URL
    or a :class:`~otel_replay.replay.Run`. In strict mode (the default) no socket opens and a
    request the recording lacks raises :class:`~otel_replay.errors.UnmatchedRequestError`.
    ``otel_replay.run()`` blocks without their own seed get the recorded one. Inside the block
    the wall clock reads the recorded run's time (``clock``, default ``OTEL_REPLAY_CLOCK``:
    ``recorded``; ``live`` leaves it alone) and, under ``fast`` timing, sleeps return at once.
    ``live_tools="read"`` runs read tools live (their recorded steps still matched and
    compared: a live result that differs from the recorded one is a divergence at that step);
    write tools never run.

    A fork changes the recording as the ``replay`` verb's flags of the same names do:
    ``override={3: "@result.json"}`` (or ``"text:…"``, inline JSON, a JSON value),
    ``inject={2: "http:429"}``, ``state={"after_search": {"docs": []}}``, ``live_from=5``,
    ``allow_writes=True``; a step that does not exist or does not take what it is given
    raises :class:`~otel_replay.errors.ConfigError` before the block runs.
    The yielded result fills in as requests are served and is final once the block exits;
    when the block raises, ``result.agent.error`` names the exception (and ``result.outcome``
    is ``agent_failed`` if nothing diverged) before it propagates::

        with otel_replay.replaying("r_8821") as result:
            agent()
        assert result.identical, result.first_divergence
    """
    _check_options(strict, timing, clock, live_tools)
    config = settings.load()
    if isinstance(run, Run):
        recorded = run
    else:
        from otel_replay.replay.sources import load_run  # noqa: PLC0415 - import cycle

        recorded = load_run(run, store=store or config.store)
    plan = ForkPlan.build(
        override=override,
        inject=inject,
        state=state,
        live_from=live_from,
        allow_writes=allow_writes,
    ).check(recorded, live_read_tools=live_tools == "read")
    session = ReplaySession(
        recorded,
        strict=strict,
        timing=timing,
        redactor=_redactor(config.redact),
        live_read_tools=live_tools == "read",
        ignore=config.ignore,
        fork=plan,
    )
    undo = install(session)
    world = World(recorded.start_ns, clock or config.clock, timing)
    try:
        world.start()  # a failure here must not leave the session serving the process
        session.reached = world.reach
        if session.live_from is not None:
            session.live_from.on_live(world.go_live)
        use_recorded_seed(recorded.seed)
        yield session.result
    except BaseException as exc:
        session.result.agent = AgentStatus.raised(exc)
        raise
    finally:
        use_recorded_seed(None)
        world.stop()
        undo()
        session.close()


@functools.lru_cache(maxsize=8)
def _redactor(patterns: tuple[re.Pattern[bytes], ...]) -> Redactor:
    """One redactor per set of patterns for all of the process's replays, as the capture keeps
    one for the process: what it learned (secrets the requests sent, URLs it redacted)
    outlives a replay, and the next one's first request does not redo it."""
    return Redactor(patterns)


def _check_options(strict: object, timing: object, clock: object, live_tools: object) -> None:
    """ConfigError naming an option whose value means nothing (``strict="yes"`` would
    otherwise read as true, ``timing="slow"`` as fast)."""
    allowed: tuple[tuple[str, object, tuple[object, ...]], ...] = (
        ("strict", strict, (True, False)),
        ("timing", timing, ("fast", "recorded")),
        ("clock", clock, (None, "recorded", "live")),
        ("live_tools", live_tools, (None, "read")),
    )
    for name, value, choices in allowed:
        if not any(type(value) is type(c) and value == c for c in choices):
            shown = ", ".join(repr(c) for c in choices)
            raise ConfigError(f"replaying(): {name}={value!r} is not one of {shown}")
