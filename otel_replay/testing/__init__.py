"""Testing kit: capture spans and metrics in memory and read them as plain dicts, with span
ids that count and a clock that steps when asked.

Loaded lazily: pytest imports this package for its plugin in every session (and every xdist
worker), which must not pay for the OTel SDK and the instrumentor until a test asks."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from otel_replay.testing._kit import CaptureKit, IncrementalIdGenerator, TimeGenerator

__all__ = ["CaptureKit", "IncrementalIdGenerator", "TimeGenerator"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'otel_replay.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module("otel_replay.testing._kit"), name)
    globals()[name] = value
    return value
