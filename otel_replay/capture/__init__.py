"""Capture: the seams that watch transports (httpx, httpx2, urllib3, aiohttp) and turn each
exchange into a step and its GenAI span."""

from __future__ import annotations

from otel_replay.capture._calls import attempt_attributes
from otel_replay.capture._recorder import REQUEST_HASH_EXTENSION, Recorder, prompt_hash
from otel_replay.capture._step import in_exchange

__all__ = [
    "REQUEST_HASH_EXTENSION",
    "Recorder",
    "attempt_attributes",
    "in_exchange",
    "prompt_hash",
]
