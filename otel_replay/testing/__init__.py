"""Testing kit: capture spans and metrics in memory and read them as plain dicts, with span
ids that count and a clock that steps when asked."""

from otel_replay.testing._kit import CaptureKit, IncrementalIdGenerator, TimeGenerator

__all__ = ["CaptureKit", "IncrementalIdGenerator", "TimeGenerator"]
