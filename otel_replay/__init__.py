"""otel-replay: record LLM agents through OpenTelemetry and replay them deterministically.

The public API is re-exported here and loaded lazily, so ``import otel_replay`` stays cheap in
processes that only need one part of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from otel_replay.errors import CodecError, ConfigError, OtelReplayError

if TYPE_CHECKING:
    from otel_replay.capture._run import run
    from otel_replay.capture.instrumentor import ReplayInstrumentor

__version__ = "0.1.0"

__all__ = [
    "CodecError",
    "ConfigError",
    "OtelReplayError",
    "ReplayInstrumentor",
    "__version__",
    "run",
]

_LAZY = {
    "run": "otel_replay.capture._run",
    "ReplayInstrumentor": "otel_replay.capture.instrumentor",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'otel_replay' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
