"""The real wall clock, for otel-replay's own records while a replay moves the application's."""

from __future__ import annotations

import sys
import time

__all__ = ["wall_gmtime", "wall_ns"]


def _hatch() -> object | None:
    """time-machine's escape hatch when time-machine is loaded and travelling."""
    module = sys.modules.get("time_machine")
    if module is None:
        return None
    hatch = module.escape_hatch
    return hatch if hatch.is_travelling() else None


def wall_ns() -> int:
    """Real Unix time in nanoseconds."""
    hatch = _hatch()
    return hatch.time.time_ns() if hatch is not None else time.time_ns()  # type: ignore[attr-defined]


def wall_gmtime() -> time.struct_time:
    """Real UTC time as a struct_time."""
    hatch = _hatch()
    return hatch.time.gmtime() if hatch is not None else time.gmtime()  # type: ignore[attr-defined]
