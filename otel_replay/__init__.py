"""otel-replay: record LLM agents through OpenTelemetry and replay them deterministically.

The public API, re-exported here and loaded lazily."""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_replay._lazy import lazy_names as _lazy_names
from otel_replay.errors import (
    CircuitOpenError,
    CodecError,
    ConfigError,
    CorruptBlobError,
    CorruptIndexError,
    NetworkBlockedError,
    OtelReplayError,
    RecordedError,
    RecordedValueError,
    RetryOverflowError,
    RunNotFoundError,
    SourceError,
    StoreError,
    StoreFormatError,
    StoreNotFoundError,
    StoreNotWritableError,
    ToolContractError,
    UnmatchedRequestError,
)

if TYPE_CHECKING:
    from otel_replay.capture.instrumentor import ReplayInstrumentor
    from otel_replay.envelope.tools import Budget, idempotency_key, tool
    from otel_replay.envelope.values import checkpoint, now, side_effect, uuid4
    from otel_replay.export import ReplaySpanExporter
    from otel_replay.replay import ReplayResult, replaying
    from otel_replay.runs import run
    from otel_replay.store import Store

__version__ = "0.1.0"

__all__ = [
    "Budget",
    "CircuitOpenError",
    "CodecError",
    "ConfigError",
    "CorruptBlobError",
    "CorruptIndexError",
    "NetworkBlockedError",
    "OtelReplayError",
    "RecordedError",
    "RecordedValueError",
    "ReplayInstrumentor",
    "ReplayResult",
    "ReplaySpanExporter",
    "RetryOverflowError",
    "RunNotFoundError",
    "SourceError",
    "Store",
    "StoreError",
    "StoreFormatError",
    "StoreNotFoundError",
    "StoreNotWritableError",
    "ToolContractError",
    "UnmatchedRequestError",
    "__version__",
    "checkpoint",
    "idempotency_key",
    "now",
    "replaying",
    "run",
    "side_effect",
    "tool",
    "uuid4",
]

_LAZY = {
    "run": "otel_replay.runs._run",
    "tool": "otel_replay.envelope.tools",
    "Budget": "otel_replay.envelope.tools",
    "idempotency_key": "otel_replay.envelope.tools",
    "now": "otel_replay.envelope.values",
    "uuid4": "otel_replay.envelope.values",
    "side_effect": "otel_replay.envelope.values",
    "checkpoint": "otel_replay.envelope.values",
    "ReplayInstrumentor": "otel_replay.capture.instrumentor",
    "ReplaySpanExporter": "otel_replay.export",
    "Store": "otel_replay.store",
    "replaying": "otel_replay.replay",
    "ReplayResult": "otel_replay.replay",
}


__getattr__ = _lazy_names(__name__, _LAZY, globals())
