"""Whole spans from the testing kit's deterministic clock, cut to what a test compares."""

from __future__ import annotations

from typing import Any

SECOND = 1_000_000_000


def outline(spans: list[dict[str, Any]], *attributes: str) -> list[tuple[Any, ...]]:
    """Each span as (name, trace id, span id, parent, start s, end s, *attribute values)."""
    return [
        (
            span["name"],
            span["trace_id"],
            span["span_id"],
            span["parent"],
            span["start_time"] // SECOND,
            span["end_time"] // SECOND,
            *(span["attributes"].get(key) for key in attributes),
        )
        for span in spans
    ]
