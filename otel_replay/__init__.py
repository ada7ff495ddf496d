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
    NetworkBlockedError,
    OtelReplayError,
    RunNotFoundError,
    SourceError,
    StoreError,
    StoreFormatError,
    StoreNotFoundError,
    StoreNotWritableError,
    UnmatchedRequestError,
)

if TYPE_CHECKING:
    from otel_replay.capture._run import run
    from otel_replay.capture.instrumentor import ReplayInstrumentor
    from otel_replay.export import ReplaySpanExporter
    from otel_replay.replay import ReplayResult, replaying
    from otel_replay.store import Store

__version__ = "0.1.0"

__all__ = [
    "CodecError",
    "ConfigError",
    "CorruptBlobError",
    "CorruptIndexError",
    "NetworkBlockedError",
    "OtelReplayError",
    "ReplayInstrumentor",
    "ReplayResult",
    "ReplaySpanExporter",
    "RunNotFoundError",
    "SourceError",
    "Store",
    "StoreError",
    "StoreFormatError",
    "StoreNotFoundError",
    "StoreNotWritableError",
    "UnmatchedRequestError",
    "__version__",
    "replaying",
    "run",
]

_LAZY = {
    "run": "otel_replay.capture._run",
    "ReplayInstrumentor": "otel_replay.capture.instrumentor",
    "ReplaySpanExporter": "otel_replay.export",
    "Store": "otel_replay.store",
    "replaying": "otel_replay.replay",
    "ReplayResult": "otel_replay.replay",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'otel_replay' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
