"""Capture: the seams that watch transports and turn each exchange into a step and its span.

Loaded lazily: a replay asks only whether an exchange is being recorded (``in_exchange``),
which does not need the OpenTelemetry SDK the recorder and its span processor load."""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_replay._lazy import lazy_names as _lazy_names

if TYPE_CHECKING:
    from otel_replay.capture._calls import attempt_attributes
    from otel_replay.capture._recorder import Recorder
    from otel_replay.capture._step import REQUEST_HASH_EXTENSION, in_exchange

__all__ = [
    "REQUEST_HASH_EXTENSION",
    "Recorder",
    "attempt_attributes",
    "in_exchange",
]

_LAZY = {
    "REQUEST_HASH_EXTENSION": "otel_replay.capture._step",
    "Recorder": "otel_replay.capture._recorder",
    "attempt_attributes": "otel_replay.capture._calls",
    "in_exchange": "otel_replay.capture._step",
}

__getattr__ = _lazy_names(__name__, _LAZY, globals())
