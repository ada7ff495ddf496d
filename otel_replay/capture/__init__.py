"""Capture: the seams that watch transports and turn each exchange into a step and its span."""

from __future__ import annotations

from otel_replay.capture._calls import attempt_attributes
from otel_replay.capture._recorder import REQUEST_HASH_EXTENSION, Recorder
from otel_replay.capture._step import in_exchange

__all__ = [
    "REQUEST_HASH_EXTENSION",
    "Recorder",
    "attempt_attributes",
    "in_exchange",
]
