"""Repacking and merging: packs and record files rewritten fewer and recompressed.

Flushes write fast (zstd level 3), one pack per flush and one record file per run per flush.
Repacking copies the objects of small (or, for gc, mostly dead) packs into new packs at a high
zstd level, in groups of :data:`GROUP_BYTES` so memory stays bounded, indexes them there, and
only then deletes the packs the index no longer locates anything in: an object is never
deleted here, only copied, so no lock is needed. Merging does the same for a writer's
record files. A store closing merges what it wrote (within a deadline); ``compact`` merges
everything; gc repacks what its sweep will thin out.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from otel_replay.errors import CorruptBlobError
from otel_replay.store import _rows
from otel_replay.store._format import pack_path, parse_pack_path, parse_record_name, record_path
from otel_replay.store._fs import Backend
from otel_replay.store._index import Index, Tx
from otel_replay.store._lock import StoreLock
from otel_replay.store._pack import PackBuilder, PackError, entries, frame_compressor
from otel_replay.store._read import ObjectReader
from otel_replay.store._records import RecordError, decode_record, merge_frames, read_frames
from otel_replay.store._sync import Listing, list_files, read_pack_table, sync
from otel_replay.store._types import Progress
from otel_replay.store._write import Session

__all__ = ["Context", "candidates", "compact", "merge_records", "merge_session", "repack"]

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
class Context:
    """What gc works on."""

    backend: Backend
    index: Index
    reader: ObjectReader
    lock: StoreLock
    remote: bool
    tables: dict[str, list[bytes]] = field(default_factory=dict)
    """The digests in each pack's table, by pack name (a pack's file never changes)."""


def located_in(ctx: Context, name: str) -> list[tuple[bytes, int]]:
    """(digest, size) of the objects the index locates in pack ``name``, looked up through
    the pack's own table (every indexed object when the table cannot be read)."""
    conn = ctx.index.conn()
    with ctx.index.guard():
        row = conn.execute("SELECT size FROM packs WHERE name = ?", (name,)).fetchone()
    if row is None:
        return []  # not indexed: the index locates nothing there
    digests = ctx.tables.get(name)
    if digests is None:
        try:
            table = read_pack_table(ctx.backend, pack_path(name), row[0])
            digests = ctx.tables[name] = [entry.digest for entry in entries(table)]
        except (PackError, OSError):
            pass  # damaged or gone: every object is looked at
    with ctx.index.guard():
        return _rows.pack_objects(conn, name, digests)


def drop(ctx: Context, tx: Tx, name: str, located: list[tuple[bytes, int]]) -> None:
    """Forget pack ``name`` and the objects ``located`` in it (:func:`located_in`)."""
    _rows.drop_pack(tx.conn, name, [digest for digest, _ in located])
    ctx.tables.pop(name, None)


def repack(ctx: Context, names: list[str], keep: set[bytes] | None, deadline: float | None) -> int:
    """Copy the objects of packs ``names`` (only those in ``keep`` when given) into new
    packs, indexed there; the number of objects copied. Stops early past ``deadline``."""
    group = PackBuilder(frame_bytes=1 << 20)
    copied = 0

    def seal() -> None:
        nonlocal group
        if group.count:
            pack = group.seal(frame_compressor(repack_level(group.raw_bytes)))
            ctx.backend.publish(pack_path(pack.name), pack.data, replace=True)
            ctx.backend.sync()
            with ctx.index.transaction() as tx:
                _rows.add_pack(tx.conn, pack.name, len(pack.data), pack.table, move=True)
        group = PackBuilder(frame_bytes=1 << 20)

    for name in names:
        for digest, _ in located_in(ctx, name):
            if keep is not None and digest not in keep:
                continue
            try:
                kind, data = ctx.reader.raw(digest)
            except CorruptBlobError:
                continue  # left where it is: verify names it, the sweep keeps its pack
            group.add(digest, kind, data)
            copied += 1
            if group.raw_bytes >= GROUP_BYTES:
                seal()
                if deadline is not None and time.monotonic() > deadline:
                    return copied
    seal()
    return copied


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


def merge_records(
    ctx: Context, only: Mapping[str, list[str]] | None, deadline: float | None
) -> int:
    """Merge each writer's record files of a run into one (``only``: these files, by run id);
    the number of files merged away. The merged file is published before the others go."""
    groups: dict[tuple[str, str], list[str]] = {}
    if only is None:
        for rel in list_files(ctx.backend).records:
            directory, name = rel.rsplit("/", 1)
            parsed = parse_record_name(name)
            assert parsed is not None
            groups.setdefault((directory, parsed.writer), []).append(rel)
    else:
        for paths in only.values():
            for rel in paths:
                directory, name = rel.rsplit("/", 1)
                parsed = parse_record_name(name)
                assert parsed is not None
                groups.setdefault((directory, parsed.writer), []).append(rel)
    merged = 0
    for (directory, writer), paths in groups.items():
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
        try:
            run_id = decode_record(frames.records[0]).run_id
        except RecordError:
            continue  # damage stays where verify finds it
        rel = record_path(run_id, writer, first, last)
        if rel.rsplit("/", 1)[0] != directory or rel in paths:
            continue
        ctx.backend.publish(rel, data, replace=True)
        ctx.backend.sync()
        with ctx.index.transaction() as tx:
            row = tx.execute("SELECT run FROM records WHERE path = ?", (paths[0],)).fetchone()
            if row is not None:
                record = _rows.add_record(tx.conn, rel, row[0], len(data))
                marks = ",".join("?" * len(paths))
                tx.execute(
                    "UPDATE steps SET record = ? WHERE record IN "
                    f"(SELECT id FROM records WHERE path IN ({marks}))",
                    (record, *paths),
                )
                tx.execute(f"DELETE FROM records WHERE path IN ({marks})", tuple(paths))
        for old in paths:
            ctx.backend.delete(old)
        ctx.backend.sync()
        merged += len(paths) - 1
    return merged


def compact(ctx: Context, *, progress: Progress | None = None) -> int:
    """Repack every small pack and merge every writer's record files; the number of
    files merged away."""
    sync(ctx.index, ctx.backend)
    listing = list_files(ctx.backend)
    names = candidates(ctx, listing, None)
    if names:
        repack(ctx, names, None, None)
    # Indexed packs that locate nothing hold only copies (two writers raced to store the
    # same objects): they go with the repacked ones.
    listed = [n for rel in listing.packs if (n := parse_pack_path(rel)) is not None]
    _drop_moved(ctx, [n for n in listed if _rows.pack_known(ctx.index.conn(), n)])
    if progress:
        progress(1, 2)
    merged = merge_records(ctx, None, None)
    ctx.index.vacuum()
    if progress:
        progress(2, 2)
    return (len(names) - 1 if names else 0) + merged


def _drop_moved(ctx: Context, names: list[str]) -> None:
    """Delete the packs ``names`` once the index locates none of their objects there (all
    were copied elsewhere): nothing is lost, so no lock is needed."""
    for name in names:
        if located_in(ctx, name):
            continue
        ctx.backend.delete(pack_path(name))
        with ctx.index.transaction() as tx:
            drop(ctx, tx, name, [])
    ctx.backend.sync()
    ctx.reader.forget()


def merge_session(ctx: Context, session: Session, deadline: float | None) -> None:
    """At close: repack the packs one session wrote at a high level (so a store's size does
    not depend on how often it was flushed), and merge its record files, until ``deadline``
    (``time.monotonic()``); whatever is left undone stays valid as it is."""
    if session.packs:
        repack(ctx, session.packs, None, deadline)
        _drop_moved(ctx, session.packs)
    merge_records(ctx, {run_id: s.records for run_id, s in session.runs.items()}, deadline)
    ctx.index.vacuum()
