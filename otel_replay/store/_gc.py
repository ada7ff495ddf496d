"""Retention, garbage collection and repacking.

A run is kept for a number of days after its last activity that depends on its status — ok
runs :attr:`Retention.ok_days` (7), others :attr:`Retention.error_days` (30) — and forever
when pinned; a run still being recorded (not closed, active within :data:`GRACE_S`) is never
expired. ``gc`` then, as git gc and restic prune do:

1. removes the expired runs' record files, then their index rows;
2. *marks* every object a remaining run references (its records' bodies and span strings, and
   what their manifests reference), read from the record files themselves, not the index;
3. *repacks*: the live objects of packs that are mostly dead or small are copied into new
   packs at a high zstd level (memory bounded by :data:`GROUP_BYTES`) and indexed there;
4. *sweeps*, holding the store lock alone (local stores), so no flush is between deciding an
   object is stored and committing its record: it marks again what records appeared since
   step 2, then deletes each pack that locates no live object. An object no one references
   goes with its pack; one that gained a reference stays.

If any live record cannot be read, nothing is swept (what it references is unknown) and the
report says why. A remote store has no lock: its sweep marks again right before deleting and
leaves packs younger than :data:`GRACE_S` alone; a writer that reuses an object in the
instant between that mark and the deletion is the one race left, so run gc on a bucket when
no machine records into it.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from otel_replay import settings
from otel_replay.errors import CorruptBlobError
from otel_replay.store import _rows
from otel_replay.store._format import pack_path, parse_pack_path, parse_record_name, record_path
from otel_replay.store._fs import Backend
from otel_replay.store._index import Index
from otel_replay.store._lock import StoreLock
from otel_replay.store._objects import ManifestError, manifest_refs
from otel_replay.store._pack import KIND_MANIFEST, NewObject, encode_pack
from otel_replay.store._read import MAX_DEPTH, ObjectReader
from otel_replay.store._records import (
    decode_records,
    frame_record,
    iter_refs,
    merge_frames,
    read_frames,
)
from otel_replay.store._sync import Listing, list_files, sync
from otel_replay.store._types import GcReport, Progress, RunInfo
from otel_replay.store._write import Session

__all__ = ["GRACE_S", "Context", "Retention", "collect", "compact", "merge_session"]

DAY_NS = 86_400 * 10**9
GRACE_S = 3600.0
"""Files younger than this that nothing references are left alone: a writer may be at work."""
SMALL_PACK = 4 << 20
"""Packs smaller than this are merged by repacking."""
GROUP_BYTES = 16 << 20
"""Uncompressed bytes of objects per repacked pack (and held in memory at once)."""


def repack_level(raw_bytes: int) -> int:
    """zstd level for a repacked pack of ``raw_bytes``: 19 (best, ~2 MB/s here) up to 1 MiB,
    9 up to 16 MiB, 3 beyond."""
    if raw_bytes <= 1 << 20:
        return 19
    return 9 if raw_bytes <= 16 << 20 else 3


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


@dataclass(frozen=True, slots=True)
class Context:
    """What gc works on."""

    backend: Backend
    index: Index
    reader: ObjectReader
    lock: StoreLock
    remote: bool


@dataclass(slots=True)
class _Mark:
    live: set[bytes] = field(default_factory=set)
    read: set[str] = field(default_factory=set)
    unreadable: list[str] = field(default_factory=list)


def _mark(ctx: Context, records: Iterable[str], mark: _Mark) -> None:
    """Add what the record files reference (and their manifests, transitively)."""
    todo: list[tuple[bytes, int]] = []
    for rel in records:
        if rel in mark.read:
            continue
        mark.read.add(rel)
        try:
            decoded = decode_records(ctx.backend.read(rel))
        except FileNotFoundError:
            continue  # merged or removed since listed
        if decoded.problems:
            mark.unreadable.append(f"{ctx.backend.location}/{rel}")
        todo.extend((d, 0) for r in decoded.records for d in iter_refs(r))
    while todo:
        digest, depth = todo.pop()
        if digest in mark.live:
            continue
        mark.live.add(digest)
        try:
            kind, data = ctx.reader.raw(digest)
            if kind == KIND_MANIFEST and depth < MAX_DEPTH:
                todo.extend((ref, depth + 1) for ref in manifest_refs(data))
        except (CorruptBlobError, ManifestError):
            continue  # damage for verify to name; the digest itself stays marked


def _repack(ctx: Context, names: list[str], keep: set[bytes] | None, deadline: float | None) -> int:
    """Copy the objects of packs ``names`` (only those in ``keep`` when given) into new
    packs, indexed there; the number of objects copied. Stops early past ``deadline``."""
    conn = ctx.index.conn()
    group: list[NewObject] = []
    size = copied = 0

    def seal() -> None:
        nonlocal group, size
        if group:
            pack = encode_pack(group, repack_level(size), frame_bytes=1 << 20)
            ctx.backend.publish(pack_path(pack.name), pack.data, replace=True)
            ctx.backend.sync()
            with ctx.index.transaction() as tx:
                _rows.add_pack(tx.conn, pack.name, len(pack.data), pack.entries, move=True)
        group, size = [], 0

    for name in names:
        with ctx.index.guard():
            objects = _rows.pack_objects(conn, name)
        for digest, _ in objects:
            if keep is not None and digest not in keep:
                continue
            try:
                kind, data = ctx.reader.raw(digest)
            except CorruptBlobError:
                continue  # left where it is: verify names it, the sweep keeps its pack
            group.append(NewObject(digest, kind, data))
            size += len(data)
            copied += 1
            if size >= GROUP_BYTES:
                seal()
                if deadline is not None and time.monotonic() > deadline:
                    return copied
    seal()
    return copied


@dataclass(frozen=True, slots=True)
class _Swept:
    packs: int
    objects: int
    bytes: int


def _sweep(ctx: Context, mark: _Mark, now: float) -> _Swept:
    """Delete every pack that locates no live object (see the module docstring)."""
    with ctx.lock.exclusive():
        if ctx.remote:
            sync(ctx.index, ctx.backend)
        listing = list_files(ctx.backend)
        _mark(ctx, listing.records, mark)
        if mark.unreadable:
            return _Swept(0, 0, 0)
        conn = ctx.index.conn()
        packs = objects = freed = 0
        for rel, (size, mtime) in listing.packs.items():
            name = parse_pack_path(rel)
            assert name is not None
            if ctx.remote and now - mtime < GRACE_S:
                continue
            with ctx.index.guard():
                located = _rows.pack_objects(conn, name)
            if any(digest in mark.live for digest, _ in located):
                continue
            if not located and now - mtime < GRACE_S and not _rows.pack_known(conn, name):
                continue  # not indexed yet: a writer may not have committed it
            ctx.backend.delete(rel)
            with ctx.index.transaction() as tx:
                _rows.drop_pack(tx.conn, name)
                _rows.count_sweep(tx.conn)
            packs += 1
            objects += len(located)
            freed += size
        ctx.backend.sync()
        ctx.reader.forget()
        return _Swept(packs, objects, freed)


def _holds_live(conn: sqlite3.Connection, name: str, live: set[bytes]) -> bool:
    """Whether the index locates a live object in pack ``name``."""
    return any(digest in live for digest, _ in _rows.pack_objects(conn, name))


def _dead_objects(ctx: Context, listing: Listing, live: set[bytes], repack: list[str]) -> int:
    """How many objects a sweep after repacking ``repack`` drops: the dead ones of the packs
    that locate no live object, and of the repacked ones."""
    conn = ctx.index.conn()
    count = 0
    for rel in listing.packs:
        name = parse_pack_path(rel) or ""
        located = _rows.pack_objects(conn, name)
        if name in repack or not any(d in live for d, _ in located):
            count += sum(d not in live for d, _ in located)
    return count


def _bytes(listing: Listing) -> int:
    """Bytes of a store's packs, records and temporary files."""
    return sum(
        size
        for files in (listing.packs, listing.records, listing.temps)
        for size, _ in files.values()
    )


def _expired(runs: list[RunInfo], retention: Retention, now: float) -> list[RunInfo]:
    now_ns = int(now * 1e9)
    out = []
    for run in runs:
        expires = retention.expires_ns(run)
        recording = run.status == "incomplete" and now_ns - run.end_ns < GRACE_S * 1e9
        if expires is not None and expires <= now_ns and not recording:
            out.append(run)
    return out


def _remove_runs(ctx: Context, runs: list[RunInfo]) -> int:
    """Delete the runs' record files, then their rows; the number of files deleted."""
    files = 0
    conn = ctx.index.conn()
    for run in runs:
        row = _rows.run_row(conn, run.run_id)
        if row is None:
            continue
        for rel in _rows.run_records(conn, row.id):
            ctx.backend.delete(rel)
            files += 1
        ctx.backend.sync()
        with ctx.index.transaction() as tx:
            tx.execute("DELETE FROM runs WHERE id = ?", (row.id,))
    return files


def _candidates(ctx: Context, listing: Listing, live: set[bytes] | None) -> list[str]:
    """Packs worth repacking: small ones (when two or more), and mostly dead ones."""
    conn = ctx.index.conn()
    small, dead = [], []
    for rel, (size, _) in listing.packs.items():
        name = parse_pack_path(rel)
        assert name is not None
        with ctx.index.guard():
            located = _rows.pack_objects(conn, name)
        if not located:
            continue
        if live is not None:
            dead_bytes = sum(s for d, s in located if d not in live)
            if dead_bytes and dead_bytes * 2 >= sum(s for _, s in located):
                dead.append(name)
                continue
        if size < SMALL_PACK:
            small.append(name)
    return dead + (small if len(small) > 1 else [])


def collect(
    ctx: Context, retention: Retention, *, now: float, dry_run: bool, progress: Progress | None
) -> GcReport:
    """One gc (see the module docstring)."""
    if not dry_run:
        sync(ctx.index, ctx.backend)
    with ctx.index.guard():
        runs = _rows.run_infos(ctx.index.conn())
    expired = _expired(runs, retention, now)
    conn = ctx.index.conn()
    doomed: set[str] = set()
    for run in expired:
        row = _rows.run_row(conn, run.run_id)
        if row is not None:
            doomed.update(_rows.run_records(conn, row.id))
    listing = list_files(ctx.backend)
    before = _bytes(listing)
    mark = _Mark()
    _mark(ctx, [rel for rel in listing.records if rel not in doomed], mark)
    if progress:
        progress(1, 3)
    names = tuple(r.run_id for r in expired)
    if dry_run:
        # What the sweep would delete: the expired runs' records and the packs that locate no
        # live object (a lower bound of the bytes: repacking saves more, measured only then).
        dead = [
            (rel, size)
            for rel, (size, _) in listing.packs.items()
            if not any(
                d in mark.live for d, _ in _rows.pack_objects(conn, parse_pack_path(rel) or "")
            )
        ]
        doomed_bytes = sum(listing.records[rel][0] for rel in doomed if rel in listing.records)
        freed = sum(s for _, s in dead) + doomed_bytes
        repack = [] if mark.unreadable else _candidates(ctx, listing, mark.live)
        removed = _dead_objects(ctx, listing, mark.live, repack)
        files = len(dead) + len(doomed) + len(repack)  # a repacked pack goes once copied
        return GcReport(names, removed, freed, files, len(repack), True)
    files = _remove_runs(ctx, expired)
    skipped = None
    if mark.unreadable:
        skipped = f"record file {mark.unreadable[0]} cannot be read; nothing was swept"
    repacked = 0
    if skipped is None:
        candidates = _candidates(ctx, listing, mark.live)
        if candidates:
            repacked = len(candidates)
            _repack(ctx, candidates, mark.live, None)
    if progress:
        progress(2, 3)
    swept = _Swept(0, 0, 0) if skipped else _sweep(ctx, mark, now)
    if mark.unreadable and skipped is None:
        skipped = f"record file {mark.unreadable[0]} cannot be read; nothing was swept"
    temps = 0
    for rel, (_, mtime) in list_files(ctx.backend).temps.items():
        if now - mtime >= GRACE_S:
            ctx.backend.delete(rel)
            temps += 1
    merged = _merge_records(ctx, None, None)
    ctx.index.vacuum()
    if progress:
        progress(3, 3)
    return GcReport(
        runs_removed=names,
        blobs_removed=swept.objects,
        bytes_freed=max(0, before - _bytes(list_files(ctx.backend))),
        files_removed=files + swept.packs + temps,
        compacted=repacked + merged,
        dry_run=False,
        skipped=skipped,
    )


def _merge_records(
    ctx: Context, only: Mapping[str, list[str]] | None, deadline: float | None
) -> int:
    """Merge each recording's record files into one (``only``: these files, by run id); the
    number of files merged away. The merged file is published before the others go."""
    groups: dict[tuple[str, str], list[str]] = {}
    if only is None:
        for rel in list_files(ctx.backend).records:
            directory, name = rel.rsplit("/", 1)
            parsed = parse_record_name(name)
            assert parsed is not None
            groups.setdefault((directory, parsed.recording), []).append(rel)
    else:
        for paths in only.values():
            for rel in paths:
                directory, name = rel.rsplit("/", 1)
                parsed = parse_record_name(name)
                assert parsed is not None
                groups.setdefault((directory, parsed.recording), []).append(rel)
    merged = 0
    for (directory, recording), paths in groups.items():
        if len(paths) < 2 or (deadline is not None and time.monotonic() > deadline):
            continue
        ranges = [parse_record_name(p.rsplit("/", 1)[1]) for p in paths]
        first = min(r.first for r in ranges if r is not None)
        last = max(r.last for r in ranges if r is not None)
        try:
            frames = read_frames(b"".join(ctx.backend.read(p) for p in sorted(paths)))
        except FileNotFoundError:
            continue  # merged by someone else meanwhile
        if frames.problems or not frames.records:
            continue  # damage stays where verify finds it
        raw = sum(len(record) for record in frames.records)
        data = merge_frames(frames.records, repack_level(raw))
        run_id = decode_records(frame_record(frames.records[0])).records[0].run_id
        rel = record_path(run_id, recording, first, last)
        if rel.rsplit("/", 1)[0] != directory or rel in paths:
            continue
        ctx.backend.publish(rel, data, replace=True)
        ctx.backend.sync()
        with ctx.index.transaction() as tx:
            row = tx.execute("SELECT run FROM records WHERE path = ?", (paths[0],)).fetchone()
            if row is not None:
                tx.execute(
                    "INSERT OR REPLACE INTO records (path, run, size) VALUES (?, ?, ?)",
                    (rel, row[0], len(data)),
                )
                marks = ",".join("?" * len(paths))
                tx.execute(f"UPDATE steps SET record = ? WHERE record IN ({marks})", (rel, *paths))
                tx.execute(f"DELETE FROM records WHERE path IN ({marks})", tuple(paths))
        for old in paths:
            ctx.backend.delete(old)
        ctx.backend.sync()
        merged += len(paths) - 1
    return merged


def compact(ctx: Context, *, progress: Progress | None = None) -> int:
    """Repack every small pack and merge every recording's record files; the number of
    files merged away."""
    sync(ctx.index, ctx.backend)
    listing = list_files(ctx.backend)
    names = _candidates(ctx, listing, None)
    if names:
        _repack(ctx, names, None, None)
    # Indexed packs that locate nothing hold only copies (two writers raced to store the
    # same objects): they go with the repacked ones.
    listed = [n for rel in listing.packs if (n := parse_pack_path(rel)) is not None]
    _drop_moved(ctx, [n for n in listed if _rows.pack_known(ctx.index.conn(), n)])
    if progress:
        progress(1, 2)
    merged = _merge_records(ctx, None, None)
    ctx.index.vacuum()
    if progress:
        progress(2, 2)
    return (len(names) - 1 if names else 0) + merged


def _drop_moved(ctx: Context, names: list[str]) -> None:
    """Delete the packs ``names`` once the index locates none of their objects there (all
    were copied elsewhere): nothing is lost, so no lock is needed."""
    conn = ctx.index.conn()
    for name in names:
        with ctx.index.guard():
            if _rows.pack_objects(conn, name):
                continue
        ctx.backend.delete(pack_path(name))
        with ctx.index.transaction() as tx:
            _rows.drop_pack(tx.conn, name)
    ctx.backend.sync()
    ctx.reader.forget()


def merge_session(ctx: Context, session: Session, deadline: float | None) -> None:
    """At close: repack the packs one session wrote (two or more) at a high level, and merge
    its record files, until ``deadline`` (``time.monotonic()``); whatever is left undone
    stays valid as it is."""
    if len(session.packs) > 1:
        _repack(ctx, session.packs, None, deadline)
        _drop_moved(ctx, session.packs)
    _merge_records(ctx, {run_id: s.records for run_id, s in session.runs.items()}, deadline)
    ctx.index.vacuum()
