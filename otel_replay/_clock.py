"""The real wall clock, for otel-replay's own records while a replay moves the application's
(or the testing kit's stepping clock, :func:`use`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

__all__ = ["use", "wall_gmtime", "wall_ns"]

_fixed: Callable[[], int] | None = None


def _hatch() -> object | None:
    """time-machine's escape hatch when time-machine is loaded and travelling."""
    module = sys.modules.get("time_machine")
    if module is None:
        return None
    hatch = module.escape_hatch
    return hatch if hatch.is_travelling() else None


def wall_ns() -> int:
    """Real Unix time in nanoseconds."""
    if _fixed is not None:
        return _fixed()
    hatch = _hatch()
    return hatch.time.time_ns() if hatch is not None else time.time_ns()  # type: ignore[attr-defined]


def wall_gmtime() -> time.struct_time:
    """Real UTC time as a struct_time."""
    if _fixed is not None:
        return time.gmtime(_fixed() // 1_000_000_000)
    hatch = _hatch()
    return hatch.time.gmtime() if hatch is not None else time.gmtime()  # type: ignore[attr-defined]


def use(clock: Callable[[], int] | None) -> None:
    """Read Unix nanoseconds from ``clock`` instead of the real time (None: the real time
    again); for the testing kit's deterministic clock."""
    global _fixed  # noqa: PLW0603 - one clock per process
    _fixed = clock
