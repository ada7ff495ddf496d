"""Retention and garbage collection: expire runs, mark what the rest reference, repack, sweep."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from otel_replay import settings
from otel_replay.errors import CorruptBlobError
from otel_replay.store import _rows
from otel_replay.store._condemned import read_condemned, write_condemned
from otel_replay.store._format import label_path, pack_path, parse_pack_path
from otel_replay.store._lock import GcBusyError, GcLease
from otel_replay.store._manifest import ManifestError, manifest_refs
from otel_replay.store._pack import KIND_MANIFEST
from otel_replay.store._read import MAX_DEPTH
from otel_replay.store._records import decode_records, iter_refs
from otel_replay.store._repack import (
    SLICE_FILES,
    Context,
    candidates,
    drop,
    located_in,
    merge_records,
    record_groups,
    repack,
)
from otel_replay.store._reports import GcReport
from otel_replay.store._sync import Listing, list_files, sync
from otel_replay.store._types import Progress, Retention, RunInfo

__all__ = ["GRACE_S", "collect", "remove_runs"]

GRACE_S = 3600.0
"""Files younger than this that nothing references are left alone: a writer may be at work
(the default of ``OTEL_REPLAY_GC_GRACE_S``)."""
_RELISTS = 5
"""Listings gc's mark tries before it gives up on record files that keep vanishing."""


@dataclass(slots=True)
class _Mark:
    live: set[bytes] = field(default_factory=set)
    read: set[str] = field(default_factory=set)
    unreadable: list[str] = field(default_factory=list)
    gone: int = 0
    """Record files listed that were gone when read."""
    lease: GcLease | None = None
    """A remote store's gc lease, kept fresh while the records are read."""


def _mark(ctx: Context, records: Iterable[str], mark: _Mark) -> None:
    """Add what the record files reference (and their manifests, transitively)."""
    todo: list[tuple[bytes, int]] = []
    for rel in records:
        if rel in mark.read:
            continue
        mark.read.add(rel)
        if mark.lease is not None:
            mark.lease.keep()
        try:
            decoded = decode_records(ctx.backend.read(rel))
        except FileNotFoundError:
            mark.gone += 1  # merged or removed since listed
            continue
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


@dataclass(frozen=True, slots=True)
class _Swept:
    packs: int
    objects: int
    bytes: int


def _mark_listed(ctx: Context, mark: _Mark) -> Listing:
    """List the store and mark what its record files reference. A record file that went
    between the listing and its reading was merged into another (published first) or
    removed: the store is listed again, so the merged file is read."""
    for _ in range(_RELISTS):
        listing = list_files(ctx.backend)
        gone = mark.gone
        _mark(ctx, listing.records, mark)
        if mark.gone == gone:
            return listing
    mark.unreadable.append(f"{ctx.backend.location}/runs (record files kept vanishing)")
    return listing


def _sweep(ctx: Context, mark: _Mark, now: float, grace: float, lease: GcLease | None) -> _Swept:
    """Delete every pack that locates no live object (see the module docstring)."""
    with ctx.lock.exclusive():
        condemned: dict[str, float] = {}
        if lease is not None:
            now = lease.refresh()  # the server's time: every age below is the server's
            # Read before the listing: a pack is deleted only if it was condemned before
            # this gc listed the records (see ``Session.write`` for why that is enough).
            listed = read_condemned(ctx.backend, stamped=True)
            condemned = {} if listed is None else listed.packs
            sync(ctx.index, ctx.backend)
        listing = _mark_listed(ctx, mark)
        if mark.unreadable:
            return _Swept(0, 0, 0)
        conn = ctx.index.conn()
        doomed: dict[str, list[bytes]] = {}  # pack name -> the objects it locates
        freed = 0
        still: dict[str, float | None] = {}
        for rel, (size, mtime) in listing.packs.items():
            name = parse_pack_path(rel)
            assert name is not None
            if ctx.remote and now - mtime < grace:
                continue
            located = located_in(ctx, name)
            if any(digest in mark.live for digest, _ in located):
                continue
            if not located and now - mtime < grace and not _rows.pack_known(conn, name):
                continue  # not indexed yet: a writer may not have committed it
            if ctx.remote:  # condemned first, deleted by a gc a grace period later
                since = condemned.get(name)
                if since is None or now - since < grace:
                    still[name] = since  # None: condemned by this gc's write of the list
                    continue
            doomed[name] = [digest for digest, _ in located]
            freed += size
        if doomed and lease is not None:
            lease.refresh()  # still this gc's: no other took it over as stale
        if doomed:
            # Every doomed object is forgotten at once; each pack's row stays until its file
            # is gone. Killed on the way, no located object lacks a chunk (a writer could
            # reuse it), a sync does not read the files left back in (their packs are
            # known), and the next gc deletes them.
            with ctx.index.transaction() as tx:
                for name, digests in doomed.items():
                    _rows.drop_objects(tx.conn, name, digests)
                _rows.count_sweep(tx.conn)
            for name in doomed:
                ctx.backend.delete(pack_path(name))
            ctx.backend.sync()
            with ctx.index.transaction(checked=False) as tx:  # they locate nothing now
                for name in doomed:
                    drop(ctx, tx, name, [])
        if ctx.remote and (still or condemned):
            write_condemned(ctx.backend, still)
        ctx.backend.sync()
        ctx.reader.forget()
        return _Swept(len(doomed), sum(len(d) for d in doomed.values()), freed)


def _holds_live(ctx: Context, name: str, live: set[bytes]) -> bool:
    """Whether the index locates a live object in pack ``name``."""
    return any(digest in live for digest, _ in located_in(ctx, name))


def _dead_objects(ctx: Context, listing: Listing, live: set[bytes], repack: list[str]) -> int:
    """How many objects a sweep after repacking ``repack`` drops: the dead ones of the packs
    that locate no live object, and of the repacked ones."""
    count = 0
    for rel in listing.packs:
        name = parse_pack_path(rel) or ""
        located = located_in(ctx, name)
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


def _expired(runs: list[RunInfo], retention: Retention, now: float, grace: float) -> list[RunInfo]:
    now_ns = int(now * 1e9)
    out = []
    for run in runs:
        expires = retention.expires_ns(run)
        recording = run.status == "incomplete" and now_ns - run.end_ns < grace * 1e9
        if expires is not None and expires <= now_ns and not recording:
            out.append(run)
    return out


def remove_runs(ctx: Context, run_ids: Iterable[str]) -> int:
    """Forget the runs (their rows), then delete their record files; the number of files
    deleted. Killed in between, a run's remaining files are read again by the next sync and
    the run is removed again by the next gc (a writer's first files go first: what remains
    keeps the run's end, so it expires as it did)."""
    files = 0
    conn = ctx.index.conn()
    for run_id in run_ids:
        row = _rows.run_row(conn, run_id)
        if row is None:
            continue
        paths = _rows.run_records(conn, row.id)
        # Its rows, children first, unchecked: a cascade from a record row would read every
        # step (steps have no index by record).
        with ctx.index.transaction(checked=False) as tx:
            for table, column in (
                ("steps", "run"),
                ("span_steps", "run"),
                ("records", "run"),
                ("labels", "run"),
                ("label_files", "run"),
                ("runs", "id"),
            ):
                tx.execute(f"DELETE FROM {table} WHERE {column} = ?", (row.id,))
        ctx.backend.delete(label_path(row.name))
        for rel in paths:
            ctx.backend.delete(rel)
            files += 1
        ctx.backend.sync()
    return files


def collect(
    ctx: Context, retention: Retention, *, now: float, dry_run: bool, progress: Progress | None
) -> GcReport:
    """One gc (see the module docstring). On a remote store it holds a :class:`GcLease`
    throughout, and does nothing (``skipped`` says why) while another gc holds one."""
    grace = float(settings.read("OTEL_REPLAY_GC_GRACE_S"))
    if not ctx.remote or dry_run:
        return _collect(ctx, retention, now, grace, None, dry_run, progress)
    lease = GcLease(ctx.backend)
    try:
        lease.acquire()
    except GcBusyError as exc:
        return GcReport((), 0, 0, 0, 0, dry_run=False, skipped=str(exc))
    try:
        return _collect(ctx, retention, now, grace, lease, dry_run, progress)
    except GcBusyError as exc:
        return GcReport((), 0, 0, 0, 0, dry_run=False, skipped=str(exc))
    finally:
        lease.release()


def _collect(
    ctx: Context,
    retention: Retention,
    now: float,
    grace: float,
    lease: GcLease | None,
    dry_run: bool,
    progress: Progress | None,
) -> GcReport:
    if not dry_run:
        sync(ctx.index, ctx.backend)
    with ctx.index.guard():
        runs = _rows.run_infos(ctx.index.conn())
    expired = _expired(runs, retention, now, grace)
    conn = ctx.index.conn()
    doomed: set[str] = set()
    for run in expired:
        row = _rows.run_row(conn, run.run_id)
        if row is not None:
            doomed.update(_rows.run_records(conn, row.id))
    listing = list_files(ctx.backend)
    before = _bytes(listing)
    mark = _Mark(lease=lease)
    _mark(ctx, [rel for rel in listing.records if rel not in doomed], mark)
    if progress:
        progress(1, 3)
    names = tuple(r.run_id for r in expired)
    if dry_run:
        # What the sweep would delete: the expired runs' records and the packs that locate no
        # live object (a lower bound of the bytes: repacking saves more, known only then).
        dead = [
            size
            for rel, (size, _) in listing.packs.items()
            if not _holds_live(ctx, parse_pack_path(rel) or "", mark.live)
        ]
        doomed_bytes = sum(listing.records[rel][0] for rel in doomed if rel in listing.records)
        thinned = [] if mark.unreadable else candidates(ctx, listing, mark.live)
        removed = _dead_objects(ctx, listing, mark.live, thinned)
        files = len(dead) + len(doomed) + len(thinned)  # a repacked pack goes once copied
        kept = (rel for rel in listing.records if rel not in doomed)
        merged = sum(_merged_away(len(group)) for group in record_groups(kept).values())
        return GcReport(
            names, removed, sum(dead) + doomed_bytes, files, len(thinned), True, None, merged
        )
    files = remove_runs(ctx, (run.run_id for run in expired))
    skipped = None
    if mark.unreadable:
        skipped = f"record file {mark.unreadable[0]} cannot be read; nothing was swept"
    thinned = [] if skipped else candidates(ctx, listing, mark.live)
    if thinned:
        repack(ctx, thinned, mark.live, None)
    if progress:
        progress(2, 3)
    swept = _Swept(0, 0, 0) if skipped else _sweep(ctx, mark, now, grace, lease)
    if mark.unreadable and skipped is None:
        skipped = f"record file {mark.unreadable[0]} cannot be read; nothing was swept"
    temps = 0
    clock = now if lease is None else lease.refresh()
    for rel, (_, mtime) in list_files(ctx.backend).temps.items():
        if clock - mtime >= grace:
            ctx.backend.delete(rel)
            temps += 1
    merged = merge_records(ctx, None, None)
    ctx.index.vacuum()
    if progress:
        progress(3, 3)
    return GcReport(
        runs_removed=names,
        blobs_removed=swept.objects,
        bytes_freed=max(0, before - _bytes(list_files(ctx.backend))),
        files_removed=files + swept.packs + temps,
        compacted=len(thinned),
        dry_run=False,
        skipped=skipped,
        records_merged=merged,
    )


def _merged_away(files: int) -> int:
    """How many of one run's and writer's ``files`` record files a merge removes: all but
    one of each :data:`SLICE_FILES`."""
    return files - -(-files // SLICE_FILES) if files > 1 else 0
