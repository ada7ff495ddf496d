"""Testing kit: capture spans and metrics in memory and read them as plain dicts."""

from otel_replay.testing._kit import CaptureKit

__all__ = ["CaptureKit"]
