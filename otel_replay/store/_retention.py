"""Retention and garbage collection.

A run is kept for a number of days after its last activity (its ``end_ns``) that depends on
its status — ok runs :data:`Retention.ok_days` (7), runs with an error
:data:`Retention.error_days` (30) — and forever when pinned. ``gc`` then:

1. removes expired runs: first from the index, then their directories (so the index never
   points at deleted files; a gc cut short leaves files that the next gc removes);
2. removes what no run references: streams absent from the index (a writer killed between
   publishing a pack and committing it), leftover temporary files, and small packs already
   merged into a larger one — each only when older than :data:`GRACE_S`, so a writer still
   publishing is never raced. A stream absent from the index because a pack or a body of it
   cannot be read is kept: it is damage for ``verify`` to name, not garbage;
3. compacts streams left with several small packs (writers that were killed before close).

Every run owns its objects (see ``_stream``), so removing a run's directory can never take a
blob another run still references.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from otel_replay import settings
from otel_replay.store._format import PACKS_DIR, PINS_DIR, parse_pack_name, pin_path, run_name
from otel_replay.store._fs import Backend, FileInfo
from otel_replay.store._index import Index
from otel_replay.store._reader import PackFile, Reader, cover
from otel_replay.store._stream import SMALL_PACK, compact
from otel_replay.store._types import GcReport, Progress, RunInfo
from otel_replay.store._verify import unindexed_damage

__all__ = ["GRACE_S", "Retention", "collect"]

DAY_NS = 86_400 * 10**9
GRACE_S = 3600.0
"""Unreferenced files younger than this are left alone: their writer may still be at work."""


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
        days = self.error_days if run.status == "error" else self.ok_days
        return (run.end_ns or run.start_ns) + int(days * DAY_NS)


def _redundant(packs: list[PackFile]) -> list[PackFile]:
    """Packs whose objects all sit in a wider pack of the same stream (merged already)."""
    chosen = cover(packs)
    return [
        p
        for p in packs
        if p not in chosen
        and any(c.first <= p.first and p.last <= c.last and c != p for c in chosen)
    ]


@dataclass(slots=True)
class _Plan:
    expired: list[str] = field(default_factory=list)
    trees: set[str] = field(default_factory=set)
    loose: set[str] = field(default_factory=set)
    compact: list[tuple[str, int, int]] = field(default_factory=list)
    files: dict[str, FileInfo] = field(default_factory=dict)

    def doomed(self) -> set[str]:
        inside = {r for r in self.files if any(r.startswith(t + "/") for t in self.trees)}
        return inside | self.loose


def _expired(index: Index, backend: Backend, retention: Retention, now_ns: int) -> list[str]:
    pins = set(backend.listdir(PINS_DIR))
    expired = []
    for run in index.runs():
        expires = retention.expires_ns(run)
        pinned = pin_path(run.run_id).split("/", 1)[1] in pins
        if expires is not None and not pinned and expires <= now_ns:
            expired.append(run.run_id)
    return expired


def _plan(
    index: Index, backend: Backend, reader: Reader, retention: Retention, now: float
) -> _Plan:
    plan = _Plan(expired=_expired(index, backend, retention, int(now * 1e9)))
    expired_dirs = {run_name(run_id) for run_id in plan.expired}
    plan.trees = {f"{PACKS_DIR}/{name}" for name in expired_dirs}
    indexed = {(run_name(run), stream): (run, stream) for run, stream, _ in index.streams()}
    plan.files = backend.find(PACKS_DIR)
    streams: dict[tuple[str, int], list[PackFile]] = defaultdict(list)
    newest: dict[tuple[str, int], float] = defaultdict(float)
    for rel, (_, mtime) in plan.files.items():
        parts = rel.split("/")
        if len(parts) != 3 or parts[1] in expired_dirs:
            continue
        parsed = parse_pack_name(parts[2])
        if parts[2].startswith(".tmp-"):
            if now - mtime > GRACE_S:
                plan.loose.add(rel)
        elif parsed is not None:
            key = (parts[1], parsed[0])
            streams[key].append(PackFile(parsed[1], parsed[2], rel))
            newest[key] = max(newest[key], mtime)
    for key, packs in streams.items():
        if now - newest[key] <= GRACE_S:
            continue  # its writer may still be at work
        if key not in indexed:
            if not unindexed_damage(reader, backend.location, key[1], packs):
                plan.loose.update(p.rel for p in packs)
            continue
        plan.loose.update(p.rel for p in _redundant(packs))
        small = [p for p in cover(packs) if plan.files[p.rel][0] < SMALL_PACK]
        if len(small) > 1:
            plan.compact.append((*indexed[key], len(small)))
    by_folder: dict[str, list[str]] = defaultdict(list)
    for rel in plan.files:
        by_folder[rel.rsplit("/", 1)[0]].append(rel)
    for folder, files in by_folder.items():  # a run directory losing all its files goes whole
        if folder.count("/") == 1 and all(rel in plan.loose for rel in files):
            plan.trees.add(folder)
            plan.loose.difference_update(files)
    return plan


def collect(
    *,
    index: Index,
    backend: Backend,
    reader: Reader,
    retention: Retention,
    now: float,
    dry_run: bool,
    progress: Progress | None = None,
) -> GcReport:
    """Run the collection described in the module docstring; see ``Store.gc``."""
    plan = _plan(index, backend, reader, retention, now)
    doomed = plan.doomed()
    blobs = 0
    for rel in doomed:
        parsed = parse_pack_name(rel.rsplit("/", 1)[-1])
        if parsed is not None:
            blobs += parsed[2] - parsed[1] + 1
    freed = sum(plan.files[rel][0] for rel in doomed)
    compacted = sum(count for _, _, count in plan.compact)
    if not dry_run:
        steps = [*sorted(plan.trees), *sorted(plan.loose)]
        total, done = len(steps) + len(plan.compact), 0
        index.delete_runs(plan.expired)  # first: the index never points at deleted files
        for rel in steps:
            if rel in plan.trees:
                backend.delete_tree(rel)
            else:
                backend.delete(rel)
            done += 1
            if progress is not None:
                progress(done, total)
        backend.sync()
        for run_id, stream, _ in plan.compact:
            freed += max(compact(backend, reader, run_id, stream)[1], 0)
            done += 1
            if progress is not None:
                progress(done, total)
    return GcReport(
        runs_removed=tuple(plan.expired),
        blobs_removed=blobs,
        bytes_freed=freed,
        files_removed=len(doomed),
        compacted=compacted,
        dry_run=dry_run,
    )
