"""The exporter's losses as an OpenTelemetry metric, beside ``ReplaySpanExporter.stats()``.

``otel_replay.exporter.dropped_steps`` is an asynchronous (observable) monotonic counter: its
callback reads the capture hand-off's drop count (process-wide, cumulative) whenever a metric
reader collects, so counting a drop costs the application nothing more than it already does.
One instrument is registered per hand-off and meter provider, however many exporters share
them; with no MeterProvider configured the API's no-op (or proxy) meter makes it free.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from otel_replay.runs import Handoff

__all__ = ["DROPPED_STEPS", "observe_drops"]

DROPPED_STEPS = "otel_replay.exporter.dropped_steps"
"""Steps the hand-off refused because it stayed full (see ``ExporterStats.dropped``)."""

_lock = threading.Lock()
_observed: weakref.WeakKeyDictionary[Handoff, weakref.WeakSet[MeterProvider]] = (
    weakref.WeakKeyDictionary()
)
"""Per hand-off, the meter providers that observe it."""


def observe_drops(handoff: Handoff, meter_provider: MeterProvider | None = None) -> None:
    """Report ``handoff``'s drops as :data:`DROPPED_STEPS` through ``meter_provider`` (the
    global one when None). Calling it again for the same pair does nothing."""
    provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    with _lock:
        seen = _observed.setdefault(handoff, weakref.WeakSet())
        if provider in seen:
            return
        seen.add(provider)
    ref = weakref.ref(handoff)

    def observe(options: CallbackOptions) -> Iterable[Observation]:
        alive = ref()
        return [] if alive is None else [Observation(alive.dropped)]

    meter = provider.get_meter("otel_replay.export")
    meter.create_observable_counter(
        DROPPED_STEPS,
        callbacks=[observe],
        unit="{step}",
        description="Recorded steps lost because the capture hand-off stayed full "
        "(OTEL_REPLAY_HANDOFF_WAIT_MS); also ReplaySpanExporter.stats().dropped",
    )
