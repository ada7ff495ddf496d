"""The world a replay freezes besides calls and tools: the application's wall clock and its
sleeps."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any, ClassVar

from otel_replay._clock import wall_ns
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
        self._sdk_clock: tuple[Any, Any] | None = None  # the SDK's span clock, replaced
        self._skipped_ns = 0  # what the skipped sleeps add to the monotonic clocks
        self._skipping = True  # False once live: sleeps take their time again
        self._outer: World | None = None  # the world current before this one started
        self._reached_ns = 0  # the latest recorded step end the clock was set to
        self._lock = threading.Lock()

    @property
    def travelling(self) -> bool:
        """True while the application's clock reads the recorded run's time."""
        return self._traveller is not None

    def start(self) -> None:
        if self._clock == "recorded" and self._start_s is not None and self._travel is None:
            time_machine = _time_machine()
            self._travel = time_machine.travel(self._start_s, tick=True)
            self._traveller = self._travel.start()
            self._spans_on_the_wall_clock()
        if self._timing == "fast" and not self._patched:
            self._patch_sleeps_and_clocks()

    def _spans_on_the_wall_clock(self) -> None:
        """Have the OpenTelemetry SDK time spans (and their events) by the real clock while
        the application's reads the recorded run's: a replay's spans say when it ran and how
        long each step took, as a trace backend shows them, not when the recording did."""
        sdk = sys.modules.get("opentelemetry.sdk.trace")
        if sdk is not None and getattr(sdk, "time_ns", None) is not None:
            self._sdk_clock = (sdk, sdk.time_ns)
            setattr(sdk, "time_ns", wall_ns)  # noqa: B010 - bound by the SDK, not exported

    def stop(self) -> None:
        # A module imported during the replay bound our sleeps and clocks by name, and keeps
        # them: with no world current they act as the real ones.
        global _current  # noqa: PLW0603
        if _current is self:
            _current = self._outer
        self._skipped_ns = 0
        patched, self._patched = self._patched, []
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)
        if self._sdk_clock is not None:
            sdk, clock = self._sdk_clock
            setattr(sdk, "time_ns", clock)  # noqa: B010
            self._sdk_clock = None
        if self._travel is not None:
            self._travel.stop()
            self._travel = self._traveller = None

    def go_live(self) -> None:
        """From now on the wall clock is the real one and sleeps take their time (a fork
        gone live: ``_live_from``). The monotonic clocks keep what the skipped sleeps added:
        they must never go back."""
        self._skipping = False
        if self._travel is not None:
            self._travel.stop()
            self._travel = self._traveller = None

    def reach(self, end_ns: int) -> None:
        """A step that ended at ``end_ns`` (recorded, Unix ns) was served: the wall clock's
        next reading is that time, and it ticks on from there, so what a program reads after
        a call is what it read when recorded, however fast or slow the replay ran up to it
        (else every reading drifts by the replay's pace). Steps served out of their recorded
        order (concurrent calls) never take it back to an earlier step's end."""
        with self._lock:
            traveller = self._traveller
            if traveller is None or end_ns <= self._reached_ns:
                return
            self._reached_ns = end_ns
            traveller.move_to(end_ns / 1e9)

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
        global _current  # the one world the process's replacements serve
        patches = _Patches.of_the_time_module()
        self._outer, _current = _current, self
        # Besides the modules' own names, every name a module bound to them before the replay
        # began (``from time import sleep``, anyio's asyncio backend): later imports bind
        # ours.
        for owner, name, original in patches.bindings():
            try:
                setattr(owner, name, patches.replacements[id(original)])
            except (AttributeError, TypeError):  # a module that refuses: left as is
                continue
            self._patched.append((owner, name, original))


def _time_machine() -> ModuleType:
    """time_machine (only a replay with a recorded clock needs it), imported without pytest
    unless this process may be a pytest session: time_machine imports pytest for its plugin
    wherever pytest is installed, which would cost every replayed program more than
    time_machine itself.

    A pytest session (``pytest``, ``py.test``, ``python -m pytest``) keeps the plugin, and so
    does a program given as ``-c`` code or on stdin, as pytest-xdist's workers are. A script
    that runs ``pytest.main()`` itself runs its tests without time_machine's fixture."""
    if "pytest" in sys.modules or "time_machine" in sys.modules or _may_run_pytest():
        import time_machine  # noqa: PLC0415

        return time_machine
    # None in sys.modules makes `import pytest` raise ImportError, which time_machine takes
    # as "pytest is not installed".
    sys.modules["pytest"] = None  # type: ignore[assignment]
    try:
        import time_machine  # noqa: PLC0415
    finally:
        if "pytest" in sys.modules and sys.modules["pytest"] is None:
            del sys.modules["pytest"]
    return time_machine


_PYTEST_PROGRAMS = frozenset({"pytest", "py.test", "_pytest"})


def _may_run_pytest() -> bool:
    """Whether this process's program may be a pytest session, from its command line."""
    argv, orig = sys.argv, getattr(sys, "orig_argv", [])
    if not argv or argv[0] in ("-c", "-", ""):
        return True
    if argv[0] == "-m":  # the module's name is in the interpreter's own arguments only
        module = orig[len(orig) - len(argv)] if len(orig) > len(argv) else ""
        return module.partition(".")[0] in _PYTEST_PROGRAMS
    return os.path.basename(argv[0]).removesuffix(".exe") in _PYTEST_PROGRAMS


def _ours(frame: FrameType) -> bool:
    """True when ``frame`` runs otel-replay's own code, which reads the real clocks."""
    name = frame.f_globals.get("__name__")
    return isinstance(name, str) and name.startswith("otel_replay.")


_current: World | None = None
"""The world whose sleeps are skipped and whose clocks are moved, while one is started."""


class _Patches:
    """The process's replacements for one set of real sleeps and clocks, and where loaded
    modules bind those real ones.

    The replacements are made once and serve whichever world is current, so a name a module
    bound to one during an earlier replay stays right in every later one (and real between
    them). Finding where modules bind the real functions is the costly part of a replay's
    start (a walk of every loaded module's names), so it is remembered: a start where no module
    was loaded or replaced and none gained or lost a name since the last finds what that one
    found (compared in C); otherwise only the modules that changed have their names walked.
    """

    _made: ClassVar[dict[tuple[int, ...], _Patches]] = {}

    def __init__(self, reals: tuple[Callable[..., Any], ...]) -> None:
        real_sleep, real_async_sleep, *clocks = reals
        self._reals = reals  # held, so the ids below stay theirs
        self.replacements: dict[int, Any] = {
            id(real_sleep): _sleep(real_sleep),
            id(real_async_sleep): _async_sleep(real_async_sleep),
        }
        for real, real_ns in zip(clocks[::2], clocks[1::2], strict=True):
            self.replacements[id(real)] = _seconds_clock(real)
            self.replacements[id(real_ns)] = _ns_clock(real_ns)
        # module name -> (the module, how many names it had, those bound to a real function)
        self._seen: dict[str, tuple[weakref.ref[Any], int, tuple[str, ...]]] = {}
        # The last walk: the loaded modules, the names of those that have some (and how many
        # each had), and (module, its names, a name) wherever a real function was bound.
        self._modules: list[Any] = []
        self._names: list[dict[str, Any]] = []
        self._lengths: list[int] = []
        self._found: list[tuple[Any, dict[str, Any], str]] = []

    @classmethod
    def of_the_time_module(cls) -> _Patches:
        """The replacements for the sleeps and clocks ``time`` and ``asyncio`` hold now."""
        reals = (
            time.sleep,
            asyncio.sleep,
            time.monotonic,
            time.monotonic_ns,
            time.perf_counter,
            time.perf_counter_ns,
        )
        key = tuple(map(id, reals))
        made = cls._made.get(key)
        if made is None:
            made = cls._made[key] = cls(reals)
        return made

    def bindings(self) -> list[tuple[Any, str, Any]]:
        """Every (module, name, real function) a loaded module binds now."""
        loaded = _items(sys.modules)
        modules = [module for _, module in loaded]
        try:
            unchanged = modules == self._modules and list(map(len, self._names)) == self._lengths
        except Exception:  # an object standing in for a module compares as it likes
            unchanged = False
        if not unchanged:
            self._walk(loaded)
            self._modules = modules
        replaced = self.replacements
        found: list[tuple[Any, str, Any]] = []
        for module, names, name in self._found:
            value = names.get(name)
            if id(value) in replaced:
                found.append((module, name, value))
        return found

    def _walk(self, loaded: list[tuple[str, Any]]) -> None:
        replaced = self.replacements
        seen = self._seen
        self._names, self._lengths, self._found = [], [], []
        for key, module in loaded:
            names = getattr(module, "__dict__", None)
            if not isinstance(names, dict):
                continue
            known = seen.get(key)
            if known is not None and known[0]() is module and known[1] == len(names):
                bound = known[2]
            else:
                bound = tuple(name for name, value in _items(names) if id(value) in replaced)
                with contextlib.suppress(TypeError):  # a stand-in object: walked every time
                    seen[key] = (weakref.ref(module), len(names), bound)
            self._names.append(names)
            self._lengths.append(len(names))
            self._found.extend((module, names, name) for name in bound)


def _items(names: dict[str, Any]) -> list[tuple[str, Any]]:
    """``names``' items now. Copying them may run a finalizer (the garbage collector, woken
    by the copy's own allocations) or let another thread run, either of which may import a
    module or bind a name meanwhile: then the copy is made again."""
    for _ in range(99):
        try:
            return list(names.items())
        except RuntimeError:  # changed size during iteration
            continue
    return list(names.items())


def _sleep(real: Callable[[float], None]) -> Callable[[float], None]:
    def sleep(seconds: float) -> None:
        world = _current
        if world is not None and world._skipping and seconds > 0 and math.isfinite(seconds):
            world._advance(seconds)
            seconds = 0
        real(seconds)  # 0 still yields the GIL; a bad value fails as it would

    return sleep


def _async_sleep(real: Callable[..., Any]) -> Callable[..., Any]:
    async def async_sleep(delay: float, result: Any = None) -> Any:
        world = _current
        if world is not None and world._skipping and delay > 0 and math.isfinite(delay):
            world._advance(delay)
            delay = 0
        return await real(delay, result)

    return async_sleep


def _seconds_clock(real: Callable[[], float]) -> Callable[[], float]:
    def clock() -> float:
        world = _current
        skipped = 0 if world is None else world._skipped_ns
        if skipped and not _ours(sys._getframe(1)):
            return real() + skipped / 1e9
        return real()

    return clock


def _ns_clock(real: Callable[[], int]) -> Callable[[], int]:
    def clock_ns() -> int:
        world = _current
        skipped = 0 if world is None else world._skipped_ns
        if skipped and not _ours(sys._getframe(1)):
            return real() + skipped
        return real()

    return clock_ns
