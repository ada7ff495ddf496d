"""What the store reports about its writing and upkeep: what is buffered, the trace files
imported, what ``verify`` found, what ``gc`` removed. Apart from ``_types`` so that a verb
that only reads (``show``, ``runs``) does not build these classes at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["NOTICE_KINDS", "Buffered", "GcReport", "ImportedFile", "ProblemKind", "VerifyProblem"]


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
    ``compacted`` counts packs merged into fewer, ``records_merged`` the record files merged
    into their run's others (a dry run's count: the files of one run and writer past the
    first). ``skipped`` says why the sweep did not run, when it did not (a live run's record
    could not be read: nothing is removed that it might reference).
    """

    runs_removed: tuple[str, ...]
    blobs_removed: int
    bytes_freed: int
    files_removed: int
    compacted: int
    dry_run: bool
    skipped: str | None = None
    records_merged: int = 0
