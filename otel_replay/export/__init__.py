"""Export: the ``replay`` span exporter, which writes steps and spans into the store.

``OTEL_TRACES_EXPORTER=otlp,replay`` builds :class:`ReplaySpanExporter` from ``OTEL_REPLAY_*``;
in code, ``BatchSpanProcessor(ReplaySpanExporter(store=...))``."""

from otel_replay.export.exporter import ExporterStats, ReplaySpanExporter

__all__ = ["ExporterStats", "ReplaySpanExporter"]
