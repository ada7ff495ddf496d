"""The world a replay freezes besides calls and tools: the application's wall clock and its
sleeps.

* Clock ``recorded`` (``OTEL_REPLAY_CLOCK``, the default): ``time.time()``,
  ``time.time_ns()``, ``datetime.now()``, ``date.today()``, ``time.localtime()`` and their
  kin read the recorded run's time, starting from its start and ticking on, so logic such as
  "due today" decides as it did. time-machine does the patching, at the C level, so a name
  imported before the replay started (``from datetime import datetime``) is covered too.
* Timing ``fast`` (``OTEL_REPLAY_TIMING``, the default): ``time.sleep()`` and
  ``asyncio.sleep()`` (and so ``anyio.sleep()`` on asyncio) return at once, and the clocks
  move forward by what was slept: the recorded-time clock, and the monotonic clocks
  (``time.monotonic()``, ``monotonic_ns()``, ``perf_counter()``, ``perf_counter_ns()``, and so
  asyncio's ``loop.time()``), which otherwise run at the real pace. An SDK's retry back-off
  costs nothing, and the code after it still sees the time pass: a loop that polls "until
  ``monotonic()`` passes a deadline", sleeping between tries, makes as many tries as it did
  when recorded instead of spinning. A sleep shorter than :data:`MOVING_SLEEP_S`, or skipped
  in a daemon thread, moves no clock (see :meth:`World._advance`). A name bound to them before
  the replay began (``from time import sleep``, ``threading``'s ``monotonic``) is replaced too.
  ``asyncio.sleep(0)`` and an endless sleep keep their meaning. Under ``recorded`` timing
  sleeps keep their length and the clocks are left alone.

The monotonic clocks are moved for the application only: otel-replay's own modules (their
timeouts, a step's duration, the replay's elapsed time) read them as they are, so a skipped
sleep cannot cut a wait of theirs short. They are patched by name (time-machine leaves them
alone), so ``time.clock_gettime(CLOCK_MONOTONIC)`` and an event loop written in C (uvloop)
keep the real pace. otel-replay's own records of the replay keep the real time
(``otel_replay._clock``).
"""

from __future__ import annotations

import asyncio
import math
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from otel_replay.settings import Clock, Timing

__all__ = ["MOVING_SLEEP_S", "World"]

MOVING_SLEEP_S = 0.1
"""The shortest skipped sleep that moves the clocks. A shorter one is the poll interval of a
busy-wait on something real that no replay serves (the MCP SDK polls every 10 ms for its
stdio server to exit, filelock every 50 ms for a lock): moving the clocks by it would make
such a wait time out within a few real milliseconds (the server killed, the lock given up),
where skipping it without moving them keeps the wait's deadline in real time. Back-offs and
the polls of an API (an SDK's retry, "check the job every second") sleep longer."""


class World:
    """Freezes the clock and skips sleeps as the settings say, between :meth:`start` and
    :meth:`stop` (both idempotent)."""

    def __init__(self, start_ns: int | None, clock: Clock, timing: Timing) -> None:
        self._start_s = None if start_ns is None else start_ns / 1e9
        self._clock = clock
        self._timing = timing
        self._travel: Any = None
        self._traveller: Any = None
        self._patched: list[tuple[Any, str, Any]] = []
        self._skipped_ns = 0  # what the skipped sleeps add to the monotonic clocks
        self._lock = threading.Lock()

    @property
    def travelling(self) -> bool:
        """True while the application's clock reads the recorded run's time."""
        return self._traveller is not None

    def start(self) -> None:
        if self._clock == "recorded" and self._start_s is not None and self._travel is None:
            import time_machine  # noqa: PLC0415 - only a replay with a recorded clock needs it

            self._travel = time_machine.travel(self._start_s, tick=True)
            self._traveller = self._travel.start()
        if self._timing == "fast" and not self._patched:
            self._patch_sleeps_and_clocks()

    def stop(self) -> None:
        # A module imported during the replay bound our sleeps and clocks by name, and keeps
        # them: once nothing is patched (see _skipping) they act as the real ones again.
        self._skipped_ns = 0
        patched, self._patched = self._patched, []
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)
        if self._travel is not None:
            self._travel.stop()
            self._travel = self._traveller = None

    @property
    def _skipping(self) -> bool:
        """Sleeps are skipped while our replacements are in place (fast timing, started)."""
        return bool(self._patched)

    def _advance(self, seconds: float) -> None:
        """Move the clocks on by a sleep skipped in the calling thread, unless it is shorter
        than :data:`MOVING_SLEEP_S` or the thread is a daemon: background work (an SDK's
        telemetry uploader that polls every 200 ms) spins through its skipped sleeps at
        whatever pace the machine allows, and would push every thread's clocks forward by that
        much, where a recording's background sleeps passed alongside the program's own time."""
        if seconds < MOVING_SLEEP_S or threading.current_thread().daemon:
            return
        with self._lock:
            self._skipped_ns += round(seconds * 1e9)
            traveller = self._traveller
            if traveller is not None:
                traveller.shift(seconds)

    def _patch_sleeps_and_clocks(self) -> None:
        real_sleep = time.sleep
        real_async_sleep = asyncio.sleep

        def sleep(seconds: float) -> None:
            if self._skipping and seconds > 0 and math.isfinite(seconds):
                self._advance(seconds)
                seconds = 0
            real_sleep(seconds)  # 0 still yields the GIL; a bad value fails as it would

        async def async_sleep(delay: float, result: Any = None) -> Any:
            if self._skipping and delay > 0 and math.isfinite(delay):
                self._advance(delay)
                delay = 0
            return await real_async_sleep(delay, result)

        replacements: dict[int, Any] = {id(real_sleep): sleep, id(real_async_sleep): async_sleep}
        for name in ("monotonic", "perf_counter"):
            real: Callable[[], float] = getattr(time, name)
            real_ns: Callable[[], int] = getattr(time, f"{name}_ns")
            replacements[id(real)] = self._seconds_clock(real)
            replacements[id(real_ns)] = self._ns_clock(real_ns)
        # Besides the modules' own names, every name a module bound to them before the replay
        # began (``from time import sleep``, anyio's asyncio backend): later imports bind
        # ours.
        self._replace_everywhere(replacements)

    def _seconds_clock(self, real: Callable[[], float]) -> Callable[[], float]:
        def clock() -> float:
            skipped = self._skipped_ns
            if skipped and not _ours(sys._getframe(1)):
                return real() + skipped / 1e9
            return real()

        return clock

    def _ns_clock(self, real: Callable[[], int]) -> Callable[[], int]:
        def clock_ns() -> int:
            skipped = self._skipped_ns
            if skipped and not _ours(sys._getframe(1)):
                return real() + skipped
            return real()

        return clock_ns

    def _replace_everywhere(self, replacements: dict[int, Any]) -> None:
        for module in list(sys.modules.values()):
            names = getattr(module, "__dict__", None)
            if not isinstance(names, dict):
                continue
            for name, value in list(names.items()):
                replacement = replacements.get(id(value))
                if replacement is not None:
                    try:
                        setattr(module, name, replacement)
                    except (AttributeError, TypeError):  # a module that refuses: left as is
                        continue
                    self._patched.append((module, name, value))


def _ours(frame: FrameType) -> bool:
    """True when ``frame`` runs otel-replay's own code, which reads the real clocks."""
    name = frame.f_globals.get("__name__")
    return isinstance(name, str) and name.startswith("otel_replay.")
