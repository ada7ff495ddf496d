"""Repacking and merging: packs and record files rewritten fewer and recompressed."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from otel_replay.errors import CorruptBlobError
from otel_replay.store import _rows
from otel_replay.store._format import (
    RecordName,
    pack_path,
    parse_pack_path,
    parse_record_name,
    record_path,
)
from otel_replay.store._fs import Backend
from otel_replay.store._index import Index, Tx
from otel_replay.store._lock import StoreLock
from otel_replay.store._pack import PackBuilder, PackError, entries, frame_compressor
from otel_replay.store._read import ObjectReader
from otel_replay.store._records import (
    RecordError,
    decode_record,
    decode_records,
    merge_frames,
    read_frames,
)
from otel_replay.store._sync import Listing, list_files, read_pack_table, sync
from otel_replay.store._types import Progress
from otel_replay.store._write import Session

__all__ = [
    "Context",
    "candidates",
    "compact",
    "covering",
    "merge_records",
    "merge_session",
    "record_groups",
    "repack",
]

SMALL_PACK = 4 << 20
"""Packs smaller than this are merged by repacking."""
GROUP_BYTES = 16 << 20
"""Uncompressed bytes of objects per repacked pack (and held in memory at once)."""
SLICE_FILES = 256
"""Record files of a run merged into one at most at a time: the memory and the time one merge
takes stay bounded (a run flushed more often than this is merged in slices)."""
_BATCH = 500
"""Paths per ``IN (...)`` query (SQLite allows 999 parameters at least)."""
_RATES = ((19, 250_000), (9, 10_000_000), (3, 60_000_000))
"""Bytes per second zstd compresses a store's JSON at these levels on one slow, busy core
(low estimates): work with a deadline takes the best level it can finish before it."""


def repack_level(raw_bytes: int, deadline: float | None = None) -> int:
    """zstd level for ``raw_bytes`` repacked or merged: 19 (best, and slow) up to 1 MiB, 9 up
    to 16 MiB, 3 beyond; with a ``deadline`` (``time.monotonic()``), no better than it leaves
    time for (1 once it has passed)."""
    best = 19 if raw_bytes <= 1 << 20 else 9 if raw_bytes <= 16 << 20 else 3
    if deadline is None:
        return best
    left = deadline - time.monotonic()
    return next((lv for lv, rate in _RATES if lv <= best and raw_bytes <= left * rate), 1)


@dataclass(frozen=True, slots=True)
class Context:
    """What gc works on."""

    backend: Backend
    index: Index
    reader: ObjectReader
    lock: StoreLock
    remote: bool
    tables: dict[str, list[bytes]] = field(default_factory=dict)
    """The digests in each pack's table, by pack name (a pack's file never changes)."""


def table_of(ctx: Context, name: str) -> list[bytes] | None:
    """The digests in the table of indexed pack ``name`` (read once), or None when it is not
    indexed or its table cannot be read."""
    digests = ctx.tables.get(name)
    if digests is not None:
        return digests
    with ctx.index.guard():
        row = ctx.index.conn().execute("SELECT size FROM packs WHERE name = ?", (name,)).fetchone()
    if row is None:
        return None
    (size,) = row
    try:
        table = read_pack_table(ctx.backend, pack_path(name), size)
    except (PackError, OSError):
        return None  # damaged or gone
    digests = ctx.tables[name] = [entry.digest for entry in entries(table)]
    return digests


def located_in(ctx: Context, name: str) -> list[tuple[bytes, int]]:
    """(digest, size) of the objects the index locates in pack ``name``, looked up through
    the pack's own table (every indexed object when the table cannot be read)."""
    digests = table_of(ctx, name)
    with ctx.index.guard():
        return _rows.pack_objects(ctx.index.conn(), name, digests)


def drop(ctx: Context, tx: Tx, name: str, located: list[tuple[bytes, int]]) -> None:
    """Forget pack ``name`` and the objects ``located`` in it (:func:`located_in`)."""
    _rows.drop_pack(tx.conn, name, [digest for digest, _ in located])
    ctx.tables.pop(name, None)


def _past(deadline: float | None) -> bool:
    """Whether ``deadline`` (``time.monotonic()``; None: none) has passed."""
    return deadline is not None and time.monotonic() > deadline


def repack(
    ctx: Context, names: list[str], keep: set[bytes] | None, deadline: float | None
) -> list[str]:
    """Copy the objects of packs ``names`` (only those in ``keep`` when given) into new
    packs, indexed there; the packs gone through. No pack is begun past ``deadline`` (what
    was gathered is still written)."""
    group = PackBuilder(frame_bytes=1 << 20)
    done: list[str] = []

    def seal() -> None:
        nonlocal group
        if group.count:
            pack = group.seal(frame_compressor(repack_level(group.raw_bytes, deadline)))
            ctx.backend.publish(pack_path(pack.name), pack.data, replace=True)
            ctx.backend.sync()
            with ctx.index.transaction() as tx:
                _rows.add_pack(tx.conn, pack.name, len(pack.data), pack.table, move=True)
        group = PackBuilder(frame_bytes=1 << 20)

    for name in names:
        if _past(deadline):
            break
        for digest, _ in located_in(ctx, name):
            if keep is not None and digest not in keep:
                continue
            try:
                kind, data = ctx.reader.raw(digest)
            except CorruptBlobError:
                continue  # left where it is: verify names it, the sweep keeps its pack
            group.add(digest, kind, data)
            if group.raw_bytes >= GROUP_BYTES:
                seal()
        done.append(name)
    seal()
    return done


def candidates(ctx: Context, listing: Listing, live: set[bytes] | None) -> list[str]:
    """Packs worth repacking: small ones (when two or more), and mostly dead ones."""
    small, dead = [], []
    for rel, (size, _) in listing.packs.items():
        name = parse_pack_path(rel)
        assert name is not None
        located = located_in(ctx, name)
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


def record_groups(paths: Iterable[str]) -> dict[tuple[str, str], list[str]]:
    """Record files by run directory and writer."""
    groups: dict[tuple[str, str], list[str]] = {}
    for rel in paths:
        directory, name = rel.rsplit("/", 1)
        parsed = parse_record_name(name)
        assert parsed is not None
        groups.setdefault((directory, parsed.writer), []).append(rel)
    return groups


def _range(rel: str) -> RecordName:
    parsed = parse_record_name(rel.rsplit("/", 1)[1])
    assert parsed is not None
    return parsed


def covering(paths: Iterable[str]) -> dict[str, str]:
    """Of one writer's record files of a run, each whose range of records another one's
    range holds (a merge cut off after its index commit leaves them beside the merged
    file): file -> the widest such other file. By their names only."""
    ranges = {rel: _range(rel) for rel in paths}
    out: dict[str, str] = {}
    wide: str | None = None
    for rel in sorted(ranges, key=lambda r: (ranges[r].first, -ranges[r].last)):
        if wide is not None and ranges[rel].last <= ranges[wide].last:
            out[rel] = wide
        else:
            wide = rel
    return out


def _covered(ctx: Context, paths: list[str]) -> dict[str, str]:
    """:func:`covering`, kept to the files whose every record the covering file, indexed
    and intact, really holds."""
    out: dict[str, str] = {}
    held: dict[str, set[int] | None] = {}
    for rel, wide in covering(paths).items():
        if wide not in held:
            held[wide] = None
            with ctx.index.guard():
                known = _rows.record_known(ctx.index.conn(), wide)
            try:
                decoded = decode_records(ctx.backend.read(wide)) if known else None
            except FileNotFoundError:
                decoded = None
            if decoded is not None and not decoded.problems:
                held[wide] = {record.seq for record in decoded.records}
        seqs = held[wide]
        inner = _range(rel)
        if seqs is not None and seqs >= set(range(inner.first, inner.last + 1)):
            out[rel] = wide
    return out


def _replace_records(ctx: Context, old: list[str], new: str) -> None:
    """Point the index's steps (and step spans) from record files ``old`` to ``new``
    (indexed), forget ``old``, then delete them."""
    with ctx.index.transaction(checked=False) as tx:  # no step points at ``old`` when deleted
        row = tx.execute("SELECT id FROM records WHERE path = ?", (new,)).fetchone()
        if row is None:
            return  # not indexed: the old ones stay until it is
        (record,) = row
        for at in range(0, len(old), _BATCH):
            batch = old[at : at + _BATCH]
            marks = ",".join("?" * len(batch))
            for table in ("steps", "span_steps"):
                tx.execute(
                    f"UPDATE {table} SET record = ? WHERE record IN "
                    f"(SELECT id FROM records WHERE path IN ({marks}))",
                    (record, *batch),
                )
            tx.execute(f"DELETE FROM records WHERE path IN ({marks})", tuple(batch))
    for rel in old:
        ctx.backend.delete(rel)
    ctx.backend.sync()


def merge_records(
    ctx: Context, only: Mapping[str, list[str]] | None, deadline: float | None
) -> int:
    """Merge each writer's record files of a run into one, :data:`SLICE_FILES` at a time
    (``only``: these files, by run id); the number of files merged away. Files a merge cut
    off left beside the merged one go first. No slice is begun past ``deadline``."""
    listed = (
        list_files(ctx.backend).records
        if only is None
        else [rel for rels in only.values() for rel in rels]
    )
    merged = 0
    for group in record_groups(listed).values():
        if len(group) < 2 or _past(deadline):
            continue
        covered = _covered(ctx, group)
        for wide in set(covered.values()):
            _replace_records(ctx, [p for p, w in covered.items() if w == wide], wide)
        merged += len(covered)
        paths = sorted(p for p in group if p not in covered)  # by their first record
        for at in range(0, len(paths), SLICE_FILES):
            part = paths[at : at + SLICE_FILES]
            if len(part) > 1 and not _past(deadline):
                merged += _merge_slice(ctx, part, deadline)
    return merged


def _merge_slice(ctx: Context, paths: list[str], deadline: float | None) -> int:
    """Merge record files ``paths`` (one writer's, of one run, in order) into one; the number
    of files merged away. The merged file is published and indexed before the others are
    forgotten and deleted."""
    try:
        frames = read_frames(b"".join(ctx.backend.read(p) for p in paths))
    except FileNotFoundError:
        return 0  # merged by someone else meanwhile
    if frames.problems or not frames.records:
        return 0  # damage stays where verify finds it
    raw = sum(len(record) for record in frames.records)
    data = merge_frames(frames.records, repack_level(raw, deadline))
    try:
        run_id = decode_record(frames.records[0]).run_id
    except RecordError:
        return 0  # damage stays where verify finds it
    ranges = [_range(p) for p in paths]
    rel = record_path(
        run_id, ranges[0].writer, min(r.first for r in ranges), max(r.last for r in ranges)
    )
    if rel.rsplit("/", 1)[0] != paths[0].rsplit("/", 1)[0]:
        return 0
    ctx.backend.publish(rel, data, replace=True)
    ctx.backend.sync()
    with ctx.index.transaction() as tx:
        row = tx.execute("SELECT run FROM records WHERE path = ?", (paths[0],)).fetchone()
        if row is None:
            return 0  # not indexed (yet): the merged file is read by the next sync
        (run,) = row
        _rows.add_record(tx.conn, rel, run, len(data))
    _replace_records(ctx, paths, rel)
    return len(paths) - 1


def compact(ctx: Context, *, progress: Progress | None = None) -> int:
    """Repack every small pack and merge every writer's record files; the number of
    files merged away."""
    sync(ctx.index, ctx.backend)
    listing = list_files(ctx.backend)
    names = candidates(ctx, listing, None)
    if names:
        repack(ctx, names, None, None)
    # Indexed packs that locate nothing hold only copies (repacked, or two writers raced to
    # store the same objects): they go with the repacked ones.
    listed = [n for rel in listing.packs if (n := parse_pack_path(rel)) is not None]
    if not ctx.remote:  # where another machine's copy may be condemned, gc deletes them
        _drop_moved(ctx, [n for n in listed if _rows.pack_known(ctx.index.conn(), n)])
    if progress:
        progress(1, 2)
    merged = merge_records(ctx, None, None)
    ctx.index.vacuum()
    if progress:
        progress(2, 2)
    return (len(names) - 1 if names else 0) + merged


def _drop_moved(ctx: Context, names: list[str]) -> None:
    """Forget, then delete, those of the indexed packs ``names`` in which the index locates
    no object (each was copied elsewhere). Forgotten first, in one transaction: killed before
    the deletions, the store keeps files the index does not know that hold only copies (the
    next gc removes them), never an index row naming a missing file."""
    tables = {name: table for name in names if (table := table_of(ctx, name)) is not None}
    if not tables:
        return
    with ctx.index.transaction(checked=False) as tx:  # no object points at the rows dropped
        digests = [digest for table in tables.values() for digest in table]
        holding = set(_rows.packs_of(tx.conn, digests).values())
        empty = [name for name in tables if name not in holding]
        for name in empty:
            drop(ctx, tx, name, [])
    # Not fsynced: a file a power cut brings back holds only copies, a leftover like those.
    for name in empty:
        ctx.backend.delete(pack_path(name))
    ctx.reader.forget()


def merge_session(ctx: Context, session: Session, deadline: float | None) -> None:
    """At close: repack the packs one session wrote at a high level (so a store's size does
    not depend on how often it was flushed), and merge its record files, until ``deadline``
    (``time.monotonic()``): no further pack or run is begun past it. What is left undone
    stays valid as it is; the next gc or ``compact`` merges it. A session that wrote
    nothing (a reader's) writes nothing: it never waits for a recording's write lock."""
    if not (session.packs or session.runs):
        return
    if session.packs:
        _drop_moved(ctx, repack(ctx, session.packs, None, deadline))
    merge_records(ctx, {run_id: s.records for run_id, s in session.runs.items()}, deadline)
    if not _past(deadline):
        ctx.index.vacuum()
