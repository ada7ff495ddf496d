"""The records the store hands back when read: runs, steps, failure labels; and the retention
policy. What writing and upkeep report is in ``_reports``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from otel_replay import settings

__all__ = ["FailureLabel", "Progress", "Retention", "RunInfo", "RunStatus", "StepInfo"]

RunStatus = Literal["ok", "error", "incomplete"]
"""``incomplete``: the recorder never closed the run (it was killed, or is still recording;
or it was imported before its last spans arrived, and no import has completed it yet);
``error``: the run ended with an error, or one of its steps failed; else ``ok``."""

Progress = Callable[[int, int], None]
"""A progress callback: ``progress(done, total)``, called as work completes."""


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One recorded run (one recording of a run id), as the index knows it.

    ``run_id`` is the run's name in the store: the id it was recorded with, or, for a later
    recording of an id already in the store, ``<id>@<n>`` (``recorded_id`` is then the id as
    recorded and ``recording`` is ``n``). ``start_ns``/``end_ns`` span the run's steps and
    its recorded start and end (Unix nanoseconds). ``tokens_*`` add up its steps' (None when
    no step reported any: unknown, not zero);
    ``bytes`` adds up the raw request and response bodies recorded (before dedup and
    compression). ``models`` are the distinct models of its steps, in first-use order.
    ``error_steps`` counts steps that failed; ``error_type`` is the run's own error.
    ``parent_run_id``: for a replay or fork (``mode``), the run it re-executed.
    """

    run_id: str
    recorded_id: str
    recording: int
    mode: str | None
    start_ns: int
    end_ns: int
    status: RunStatus
    error_type: str | None
    error_steps: int
    commit: str | None
    code_dirty: bool | None
    seed: int | None
    step_count: int
    tokens_in: int | None
    tokens_out: int | None
    bytes: int
    pinned: bool
    models: tuple[str, ...]
    parent_run_id: str | None = None


@dataclass(frozen=True, slots=True)
class StepInfo:
    """One recorded step, as the index knows it (bodies and headers: ``Store.read_step``).

    Hashes are ``sha256:<hex>`` of the exact (redacted) bodies; ``response_hash`` is None when
    no response was received. ``complete`` is False when the response was cut short.
    ``run_id`` is the run's name in the store (see :class:`RunInfo`).
    """

    run_id: str
    index: int
    kind: str
    provider: str | None
    model: str | None
    request_hash: str
    response_hash: str | None
    request_size: int
    response_size: int
    trace_id: int
    span_id: int
    start_ns: int
    end_ns: int
    status_code: int | None
    error_type: str | None
    complete: bool
    tokens_in: int | None
    tokens_out: int | None


@dataclass(frozen=True, slots=True)
class FailureLabel:
    """A failure ``otel-replay triage`` found in a run: at step ``step`` (None: the run's own
    label), its ``category`` and ``severity`` (the values of ``replay.failure.category`` and
    ``replay.failure.severity``), the ``rule`` that found it, and what happened, on one line
    (``reason``)."""

    step: int | None
    category: str
    severity: str
    rule: str
    reason: str


DAY_NS = 86_400 * 10**9


@dataclass(frozen=True, slots=True)
class Retention:
    """How many days runs are kept after their last activity, by status (pinned: forever)."""

    ok_days: float = 7.0
    error_days: float = 30.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Retention:
        """The policy from ``OTEL_REPLAY_RETAIN_OK_DAYS`` and ``OTEL_REPLAY_RETAIN_ERROR_DAYS``."""
        return cls(
            ok_days=settings.read("OTEL_REPLAY_RETAIN_OK_DAYS", environ),
            error_days=settings.read("OTEL_REPLAY_RETAIN_ERROR_DAYS", environ),
        )

    def expires_ns(self, run: RunInfo) -> int | None:
        """When ``run`` expires (Unix nanoseconds), or None when it is pinned."""
        if run.pinned:
            return None
        days = self.ok_days if run.status == "ok" else self.error_days
        return (run.end_ns or run.start_ns) + int(days * DAY_NS)
