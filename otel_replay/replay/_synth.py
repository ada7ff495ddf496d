"""Semantic fidelity's entry point; the provider formats live in :mod:`otel_replay.replay.synth`."""

from __future__ import annotations

from otel_replay.replay.synth import ENDPOINTS, Synthesized, synthesize

__all__ = ["ENDPOINTS", "Synthesized", "synthesize"]
