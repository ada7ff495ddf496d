"""The world a replay freezes besides calls and tools: the application's wall clock and its
sleeps.

* Clock ``recorded`` (``OTEL_REPLAY_CLOCK``, the default): ``time.time()``,
  ``time.time_ns()``, ``datetime.now()``, ``date.today()``, ``time.localtime()`` and their
  kin read the recorded run's time, starting from its start and ticking on, so logic such as
  "due today" decides as it did. time-machine does the patching, at the C level, so a name
  imported before the replay started (``from datetime import datetime``) is covered too.
  Monotonic clocks (``time.monotonic()``, ``perf_counter()``) are left alone.
* Timing ``fast`` (``OTEL_REPLAY_TIMING``, the default): ``time.sleep()`` and
  ``asyncio.sleep()`` (and so ``anyio.sleep()`` on asyncio) return at once, and the
  recorded-time clock moves forward by what was slept: an SDK's retry back-off costs nothing
  and the code after it still sees the time pass. A name bound to them before the replay
  began (``from time import sleep``) is replaced too. ``asyncio.sleep(0)`` and an endless sleep
  keep their meaning. Under ``recorded`` timing sleeps keep their length.

otel-replay's own records of the replay keep the real time (``otel_replay._clock``).
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from typing import Any

from otel_replay.settings import Clock, Timing

__all__ = ["World"]


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
            self._patch_sleeps()

    def stop(self) -> None:
        for owner, name, original in reversed(self._patched):
            setattr(owner, name, original)
        self._patched.clear()
        if self._travel is not None:
            self._travel.stop()
            self._travel = self._traveller = None

    def _advance(self, seconds: float) -> None:
        traveller = self._traveller
        if traveller is not None:
            traveller.shift(seconds)

    def _patch_sleeps(self) -> None:
        real_sleep = time.sleep
        real_async_sleep = asyncio.sleep

        def sleep(seconds: float) -> None:
            if seconds > 0 and math.isfinite(seconds):
                self._advance(seconds)
                seconds = 0
            real_sleep(seconds)  # 0 still yields the GIL; a bad value fails as it would

        async def async_sleep(delay: float, result: Any = None) -> Any:
            if delay > 0 and math.isfinite(delay):
                self._advance(delay)
                delay = 0
            return await real_async_sleep(delay, result)

        # Besides the modules' own names, every name a module bound to them before the replay
        # began (``from time import sleep``, anyio's asyncio backend): later imports bind
        # ours.
        self._replace_everywhere({id(real_sleep): sleep, id(real_async_sleep): async_sleep})

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
