"""The records the store hands back: runs, steps, verify problems, gc reports."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["GcReport", "Progress", "RunInfo", "RunStatus", "StepInfo", "VerifyProblem"]

RunStatus = Literal["ok", "error"]

Progress = Callable[[int, int], None]
"""A progress callback: ``progress(done, total)``, called as work completes."""


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One recorded run, as the index knows it.

    ``status`` is ``"error"`` when a step failed (``error_type``) or a span of the run has an
    error status. ``start_ns``/``end_ns`` span the run's steps and spans (Unix nanoseconds).
    ``tokens_*`` add up the steps' ``gen_ai.usage.*``; ``bytes`` adds up the raw request and
    response bodies recorded (before dedup and compression). ``models`` are the distinct
    request models of its steps, in first-use order.
    """

    run_id: str
    start_ns: int
    end_ns: int
    status: RunStatus
    commit: str | None
    seed: int | None
    step_count: int
    tokens_in: int
    tokens_out: int
    bytes: int
    pinned: bool
    models: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StepInfo:
    """One recorded step, as the index knows it (bodies and headers: ``Store.fixture``).

    Hashes are ``sha256:<hex>`` of the exact (redacted) bodies; ``response_hash`` is None when
    no response was received. ``complete`` is False when the response was cut short.
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
class VerifyProblem:
    """One damaged thing found by ``Store.verify``.

    ``message`` is one line naming it. ``path`` is the file (under the store location),
    ``blob`` the ``sha256:<hex>`` of a damaged body, ``run_id``/``step_index`` the step that
    can no longer be served — each when known.
    """

    kind: Literal["pack", "object", "body", "record", "index"]
    message: str
    path: str | None = None
    blob: str | None = None
    run_id: str | None = None
    step_index: int | None = None


@dataclass(frozen=True, slots=True)
class GcReport:
    """What ``Store.gc`` removed (or, with ``dry_run``, would remove).

    ``blobs_removed`` counts stored objects (bodies, segments, records) in the deleted packs;
    ``bytes_freed`` is the size of the deleted files. ``compacted`` counts small packs merged.
    """

    runs_removed: tuple[str, ...]
    blobs_removed: int
    bytes_freed: int
    files_removed: int
    compacted: int
    dry_run: bool
