"""The records the store hands back: runs, steps, verify problems, gc reports."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from otel_replay import settings

__all__ = [
    "Buffered",
    "FailureLabel",
    "GcReport",
    "ImportedFile",
    "Progress",
    "Retention",
    "RunInfo",
    "RunStatus",
    "StepInfo",
    "VerifyProblem",
]

RunStatus = Literal["ok", "error", "incomplete"]
"""``incomplete``: the recorder never closed the run (it was killed, or is still recording;
or it was imported before its last spans arrived, and no import has completed it yet);
``error``: the run ended with an error, or one of its steps failed; else ``ok``."""

Progress = Callable[[int, int], None]
"""A progress callback: ``progress(done, total)``, called as work completes."""


@dataclass(frozen=True, slots=True)
class Buffered:
    """What was put and is not durable yet: how many steps of each run id, and spans."""

    steps: dict[str, int]
    spans: int


@dataclass(frozen=True, slots=True)
class ImportedFile:
    """A trace file whose runs were imported (``otel-replay import DIR``): as named then,
    how many bytes were read, its modification time, and the sha256 of its first 64 KiB
    (``head``) and of all the bytes read (``digest``). The same size, time and head later,
    under any name, is the same file, unchanged: a rotated file is known after its rename."""

    path: str
    size: int
    mtime_ns: int
    head: bytes
    digest: bytes


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


ProblemKind = Literal[
    "pack",
    "object",
    "body",
    "record",
    "index",
    "unindexed",
    "leftover",
    "temp",
    "incomplete",
    "labels",
    "ledger",
]


NOTICE_KINDS: frozenset[str] = frozenset(
    {"unindexed", "leftover", "temp", "incomplete", "labels", "ledger"}
)
"""Problem kinds that are worth saying but lose nothing: files a crashed writer left, copies
a cut-off compaction or gc left (``leftover``: the next gc removes them), runs cut off
mid-write, a failure labels file that cannot be read (``triage`` labels the run again), an
import ledger file that cannot be read (its trace files are read again). Every other kind is
damage."""


@dataclass(frozen=True, slots=True)
class VerifyProblem:
    """One thing ``Store.verify`` found, damaged or worth a notice (:data:`NOTICE_KINDS`).

    ``message`` is one line naming it. ``path`` is the file (under the store location),
    ``blob`` the ``sha256:<hex>`` of a damaged body, ``run_id``/``step_index`` the step that
    can no longer be served — each when known.
    """

    kind: ProblemKind
    message: str
    path: str | None = None
    blob: str | None = None
    run_id: str | None = None
    step_index: int | None = None

    @property
    def damage(self) -> bool:
        """True when something stored cannot be read back (not a mere notice)."""
        return self.kind not in NOTICE_KINDS


@dataclass(frozen=True, slots=True)
class GcReport:
    """What ``Store.gc`` removed (or, with ``dry_run``, would remove).

    ``blobs_removed`` counts objects no live run references that were dropped;
    ``bytes_freed`` is the size of the deleted files less the repacked ones written;
    ``compacted`` counts packs merged into fewer. ``skipped`` says why the sweep did not
    run, when it did not (a live run's record could not be read: nothing is removed that it
    might reference).
    """

    runs_removed: tuple[str, ...]
    blobs_removed: int
    bytes_freed: int
    files_removed: int
    compacted: int
    dry_run: bool
    skipped: str | None = None


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
