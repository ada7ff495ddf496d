"""otel-replay: record LLM agents through OpenTelemetry and replay them deterministically.

The public API is re-exported here and loaded lazily, so ``import otel_replay`` stays cheap in
processes that only need one part of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from otel_replay.errors import (
    CodecError,
    ConfigError,
    CorruptBlobError,
    CorruptIndexError,
    OtelReplayError,
    RunNotFoundError,
    StoreError,
    StoreFormatError,
    StoreNotFoundError,
    StoreNotWritableError,
)

if TYPE_CHECKING:
    from otel_replay.capture._run import run
    from otel_replay.capture.instrumentor import ReplayInstrumentor
    from otel_replay.export import ReplaySpanExporter
    from otel_replay.store import Store

__version__ = "0.1.0"

__all__ = [
    "CodecError",
    "ConfigError",
    "CorruptBlobError",
    "CorruptIndexError",
    "OtelReplayError",
    "ReplayInstrumentor",
    "ReplaySpanExporter",
    "RunNotFoundError",
    "Store",
    "StoreError",
    "StoreFormatError",
    "StoreNotFoundError",
    "StoreNotWritableError",
    "__version__",
    "run",
]

_LAZY = {
    "run": "otel_replay.capture._run",
    "ReplayInstrumentor": "otel_replay.capture.instrumentor",
    "ReplaySpanExporter": "otel_replay.export",
    "Store": "otel_replay.store",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'otel_replay' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
