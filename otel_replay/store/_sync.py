"""Reading the packs' records back: spans of a run, and the index rebuilt from the packs.

For a remote store the index is a local cache, so :func:`sync_index` is how it learns what
other machines wrote (and what another machine's ``gc`` removed). For a local store it is
how ``Store.rebuild`` recreates a damaged index. Both read the records (one small JSON object
per flush) and the bodies they point at: records leave out the bodies' sha256 and sizes,
which the index holds, so they are computed here (a rebuilt body is checked against the hash
prefix its recipe carries; ``_reader``).

A pack that cannot be read stops its stream there: the records before it are indexed, the
stream's committed mark stays below it (so the next sync reads it again: a remote read may
only have failed for a moment), and a stream whose first pack is damaged stays out of the
index. A record whose bodies cannot be read stops its stream the same way. Nothing is dropped
silently: each such pack is logged, ``verify`` names it (it checks the streams it finds on
storage, indexed or not) and ``gc`` never removes it.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from otel_replay.errors import CorruptBlobError
from otel_replay.store._facts import facts_of, merge_facts
from otel_replay.store._format import PACKS_DIR, PINS_DIR, parse_pack_name, pin_path, run_name
from otel_replay.store._fs import Backend
from otel_replay.store._index import Index
from otel_replay.store._pack import KIND_RECORD, PackError
from otel_replay.store._reader import PackFile, Reader, cover
from otel_replay.store._records import Record, decode_record
from otel_replay.store._rows import Body, step_row

__all__ = [
    "list_streams",
    "readable_records",
    "record_rows",
    "stream_records",
    "sync_index",
    "unindexable",
]

_log = logging.getLogger(__name__)

READ_ERRORS = (CorruptBlobError, PackError, ValueError, OSError)
"""What reading a pack's records raises when the pack (or the storage) is damaged."""


def list_streams(backend: Backend) -> dict[tuple[str, int], list[PackFile]]:
    """Every stream found under ``packs/``: (run directory name, stream id) -> its packs."""
    streams: dict[tuple[str, int], list[PackFile]] = defaultdict(list)
    for rel in backend.find(PACKS_DIR):
        parts = rel.split("/")
        parsed = parse_pack_name(parts[2]) if len(parts) == 3 else None
        if parsed is not None:
            streams[(parts[1], parsed[0])].append(PackFile(parsed[1], parsed[2], rel))
    return dict(streams)


def stream_records(
    reader: Reader,
    run_id: str,
    stream: int,
    *,
    start: int = 0,
    stop: int | None = None,
    packs: list[PackFile] | None = None,
) -> Iterator[tuple[int, Record]]:
    """``(object number, record)`` of the stream's records numbered ``start`` to ``stop - 1``.

    Raises CorruptBlobError for an unreadable pack and ValueError for an undecodable record.
    """
    chosen = cover(packs) if packs is not None else reader.packs(run_id, stream)
    for pack in chosen:
        if pack.last < start or (stop is not None and pack.first >= stop):
            continue
        index = reader.pack_index(pack.rel)
        for offset, (_, _, _, kind) in enumerate(index.entries):
            oid = index.first + offset
            if kind == KIND_RECORD and oid >= start and (stop is None or oid < stop):
                yield oid, decode_record(reader.raw(run_id, stream, oid)[1])


def _body(reader: Reader, run_id: str, stream: int, oid: int) -> Body:
    data, digest = reader.hashed(run_id, stream, oid)
    return digest, len(data)


def record_rows(reader: Reader, run_id: str, stream: int, oid: int, record: Record) -> list[Any]:
    """The index rows of the steps of record ``oid``; CorruptBlobError when a body of theirs
    cannot be read."""
    facts = merge_facts((run_id, facts_of(span)) for span in record.spans).get(run_id)
    steps = facts.steps if facts is not None else {}
    return [
        step_row(
            oid,
            step.index,
            (step.request_oid, step.response_oid),
            step,
            steps.get(step.index),
            _body(reader, run_id, stream, step.request_oid),
            None if step.response_oid is None else _body(reader, run_id, stream, step.response_oid),
        )
        for step in record.steps
    ]


def _apply(
    index: Index,
    reader: Reader,
    run_id: str,
    stream: int,
    records: list[tuple[int, Record]],
    end: int,
) -> str | None:
    """Index the records of a stream up to ``end``, stopping at the first record whose bodies
    cannot be read; what is wrong with that record (None when all were indexed). A stream
    whose first record is such stays out of the index."""
    rows: list[tuple[int, list[Any]]] = []
    problem = None
    for oid, record in records:
        try:
            rows.append((oid, record_rows(reader, run_id, stream, oid, record)))
        except READ_ERRORS as exc:
            problem, end = f"record {oid}: {exc}", oid
            break
    if problem is not None and not rows:
        return problem  # nothing readable: the stream stays out of the index, like a bad pack
    spans = (span for oid, record in records if oid < end for span in record.spans)
    facts = merge_facts((run_id, facts_of(span)) for span in spans)
    with index.write() as conn:
        num = Index.add_run(conn, run_id, facts.get(run_id))
        number = Index.set_stream(conn, num, stream, end)
        for _, step_rows in rows:
            Index.add_steps(conn, num, number, step_rows)
        Index.refresh_run(conn, num)
    return problem


def readable_records(
    reader: Reader, packs: list[PackFile], start: int = 0
) -> tuple[list[tuple[int, Record]], int | None, str | None]:
    """The records numbered ``start`` and up of a stream's packs, up to its first unreadable
    pack: ``(records, first object of that pack, what is wrong with it)`` (None, None when
    every pack was read)."""
    records: list[tuple[int, Record]] = []
    for pack in cover(packs):
        if pack.last < start:
            continue
        try:
            records.extend(list(_pack_records(reader, pack, start)))  # all or none
        except READ_ERRORS as exc:
            return records, max(pack.first, start), f"{reader.backend.location}/{pack.rel}: {exc}"
    return records, None, None


def unindexable(reader: Reader, stream: int, packs: list[PackFile], start: int = 0) -> str | None:
    """What keeps the records of a stream (``packs``: its pack files) numbered ``start`` and up
    out of the index: an unreadable pack, or a body that cannot be read or fails its check
    (see :func:`sync_index`); None when nothing does."""
    records, _, problem = readable_records(reader, packs, start)
    if problem is not None:
        return problem
    for oid, record in records:
        try:
            record_rows(reader, record.run_id, stream, oid, record)
        except READ_ERRORS as exc:
            return f"record {oid}: {exc}"
    return None


def sync_index(index: Index, backend: Backend, reader: Reader, *, drop_missing: bool) -> int:
    """Bring the index up to date with the records in the packs; the number of streams read.

    With ``drop_missing`` (remote stores) streams that no longer exist are removed from the
    index, and runs left without streams with them. Pins are mirrored from ``pins/``. An
    unreadable pack is logged and stops its stream (see the module docstring).
    """
    known = {(run, stream): committed for run, stream, committed in index.streams()}
    by_dir = {(run_name(run), stream): run for run, stream in known}
    found = list_streams(backend)
    read = 0
    for key, packs in sorted(found.items()):
        chosen = cover(packs)
        end = chosen[-1].last + 1 if chosen else 0
        run_id = by_dir.get(key)
        committed = known.get((run_id, key[1]), 0) if run_id is not None else 0
        if end <= committed:
            continue
        records, stop, problem = readable_records(reader, packs, committed)
        if problem is not None:
            _log.warning(
                "otel-replay: %s cannot be read, so its stream is indexed only up to it; "
                "`otel-replay verify` names every damaged file",
                problem,
            )
        run_ids = {record.run_id for _, record in records}
        if len(run_ids) != 1:
            continue  # no record (a writer died before its first one, or damage) or foreign
        (run_id,) = run_ids
        if run_name(run_id) != key[0]:
            continue
        unreadable = _apply(index, reader, run_id, key[1], records, end if stop is None else stop)
        if unreadable is not None:
            _log.warning(
                "otel-replay: a body of %s/%s cannot be read (%s), so its stream is indexed "
                "only up to it; `otel-replay verify` names every damaged file",
                backend.location,
                f"{PACKS_DIR}/{key[0]}/{key[1]:016x}",
                unreadable,
            )
        read += 1
    if drop_missing:
        present = {(by_dir.get(key), key[1]) for key in found}
        gone = [(run, stream) for run, stream in known if (run, stream) not in present]
        if gone:
            with index.write() as conn:
                for run, stream in gone:
                    Index.drop_stream(conn, run, stream)
    pinned = set(backend.listdir(PINS_DIR))
    with index.write() as conn:
        for slot, run_id, was in conn.execute("SELECT slot, id, pinned FROM runs").fetchall():
            flag = int(pin_path(run_id).split("/", 1)[1] in pinned)
            if flag != was:
                conn.execute("UPDATE runs SET pinned = ? WHERE slot = ?", (flag, slot))
    return read


def _pack_records(reader: Reader, pack: PackFile, start: int) -> Iterator[tuple[int, Record]]:
    """Records numbered ``start`` and up of one pack (read through its path: the stream's run
    id may not be known yet)."""
    index = reader.pack_index(pack.rel)
    for offset, (frame, begin, length, kind) in enumerate(index.entries):
        oid = index.first + offset
        if kind == KIND_RECORD and oid >= start:
            data = reader.frame(pack.rel, index, frame)[begin : begin + length]
            yield oid, decode_record(data)
