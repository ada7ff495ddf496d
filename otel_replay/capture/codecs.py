"""Moved to :mod:`otel_replay.codecs`; kept until ``replay/_match.py`` imports from there."""

from otel_replay.codecs import Codec, LlmRequest, detect

__all__ = ["Codec", "LlmRequest", "detect"]
