"""Export: the ``replay`` span exporter that persists fixtures and spans into the store.

It consumes the capture hand-off (:data:`otel_replay.capture.instrumentor.HANDOFF`).
"""
