"""The GenAI client metrics, with the bucket boundaries the conventions advise."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.metrics import Meter

__all__ = ["GenAiMetrics"]

_TOKEN_BUCKETS = (
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
)
_DURATION_BUCKETS = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
_METRIC_ATTRIBUTES = (
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "server.address",
    "server.port",
    "error.type",
)


class GenAiMetrics:
    """``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration``.

    With no MeterProvider configured the API hands out no-op instruments, so recording costs
    next to nothing.
    """

    def __init__(self, meter: Meter) -> None:
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=list(_TOKEN_BUCKETS),
        )
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=list(_DURATION_BUCKETS),
        )

    def record(self, span_attributes: Mapping[str, Any], seconds: float) -> None:
        """Record one finished model call from its span attributes."""
        attrs = {k: span_attributes[k] for k in _METRIC_ATTRIBUTES if k in span_attributes}
        self._duration.record(seconds, attrs)
        for token_type, key in (
            ("input", "gen_ai.usage.input_tokens"),
            ("output", "gen_ai.usage.output_tokens"),
        ):
            count = span_attributes.get(key)
            if isinstance(count, int):
                self._tokens.record(count, {**attrs, "gen_ai.token.type": token_type})
