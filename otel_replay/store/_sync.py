"""Bringing the index up to date with the files: rebuild, refresh, remote stores."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath

from otel_replay.store import _labels, _rows
from otel_replay.store._format import (
    OBJECTS_DIR,
    PINS_DIR,
    RUNS_DIR,
    parse_pack_path,
    parse_record_name,
    run_dir,
)
from otel_replay.store._fs import Backend
from otel_replay.store._imports import read_ledgers
from otel_replay.store._index import Index, Tx
from otel_replay.store._pack import PackError, parse_table
from otel_replay.store._records import Record, decode_records, span_step, steps_without_bytes
from otel_replay.store._reports import VerifyProblem

__all__ = ["TMP_PREFIX", "Listing", "SyncReport", "list_files", "read_pins", "sync"]

TMP_PREFIX = ".tmp-"
RELISTS = 5
"""Listings a sync reads record files from while some vanish as they are read (merged)."""
TABLE_READ = 64 << 10
"""Bytes read from a pack's end to find its table (more when the table is larger)."""


@dataclass(slots=True)
class Listing:
    """The store's files by kind: relative path -> (size, modification time)."""

    packs: dict[str, tuple[int, float]] = field(default_factory=dict)
    records: dict[str, tuple[int, float]] = field(default_factory=dict)
    temps: dict[str, tuple[int, float]] = field(default_factory=dict)
    strays: list[str] = field(default_factory=list)


def list_files(backend: Backend) -> Listing:
    """Every pack, record file and temporary file of the store."""
    listing = Listing()
    for top in (OBJECTS_DIR, RUNS_DIR):
        for rel, info in backend.find(top).items():
            name = PurePosixPath(rel).name
            if name.startswith(TMP_PREFIX):
                listing.temps[rel] = info
            elif top == OBJECTS_DIR and parse_pack_path(rel) is not None:
                listing.packs[rel] = info
            elif top == RUNS_DIR and parse_record_name(name) is not None:
                listing.records[rel] = info
            else:
                listing.strays.append(rel)
    return listing


def read_pack_table(backend: Backend, rel: str, size: int) -> bytes:
    """The table of the pack at ``rel`` (see ``_pack.entries``); PackError when it cannot be
    read."""
    tail = backend.read_tail(rel, min(size, TABLE_READ))
    try:
        return parse_table(tail, size)
    except PackError:
        if len(tail) >= size:
            raise
        return parse_table(backend.read(rel), size)


@dataclass(slots=True)
class SyncReport:
    """What a sync read and what it could not."""

    packs: int = 0
    records: int = 0
    dropped: int = 0
    """Packs forgotten because they are gone."""
    problems: list[VerifyProblem] = field(default_factory=list)


def read_pins(backend: Backend) -> set[str]:
    """The names of the pinned runs (each marker file holds its run's name)."""
    names: set[str] = set()
    for name in backend.listdir(PINS_DIR):
        try:
            names.add(backend.read(f"{PINS_DIR}/{name}").decode("utf-8", "surrogatepass"))
        except (OSError, UnicodeDecodeError):
            continue
    return names


def _index_records(tx: Tx, rel: str, size: int, records: list[Record], where: str) -> None:
    for record in records:
        if run_dir(record.run_id) != rel.rsplit("/", 1)[0]:
            continue  # a record filed under another run's directory is not trusted
        row = _rows.ensure_run(
            tx.conn, record.run_id, record.recording, record.facts, where, record.name
        )
        indexed = _rows.add_record(tx.conn, rel, row.id, size)
        _rows.add_steps(tx.conn, row.id, indexed, record.steps)
        spans = (span_step(entry.span) for entry in record.spans)
        _rows.add_span_steps(tx.conn, row.id, indexed, steps_without_bytes(spans, record.steps))
        if record.end is not None:
            _rows.end_run(tx.conn, row.id, record.end.end_ns, record.end.error_type)


def sync(index: Index, backend: Backend, *, forget_missing: bool = True) -> SyncReport:
    """Index the files the index lacks and (``forget_missing``) forget the ones gone."""
    report = SyncReport()
    where = backend.location
    conn = index.conn()
    # What the index knows is read before the files are listed: a file is published before
    # it is indexed, so one indexed by now is listed unless it is gone. The other way round,
    # another process's file published and indexed between the two reads would look gone,
    # and its steps or objects would be forgotten.
    with index.guard():
        known_packs = {name for (name,) in conn.execute("SELECT name FROM packs")}
        known_records = {path for (path,) in conn.execute("SELECT path FROM records")}
    listing = list_files(backend)
    on_disk_packs = {parse_pack_path(rel): rel for rel in listing.packs}
    lost: set[bytes] = set()
    if forget_missing:  # first: a pack gone may have been repacked into one listed now
        with index.transaction(checked=False) as tx:  # each one's objects go before it
            for name in known_packs - set(on_disk_packs):
                lost.update(d for d, _ in _rows.pack_objects(tx.conn, name, None))
                _rows.drop_pack(tx.conn, name, None)
                report.dropped += 1
    for name, rel in sorted(on_disk_packs.items(), key=lambda item: item[1]):
        if name is not None and name not in known_packs:
            report.packs += _index_pack(index, backend, name, rel, listing, report)
    if lost:
        # An object kept in two packs is indexed in one: if that one went, find the other.
        with index.guard():
            missing = lost - _rows.existing(conn, list(lost))
        for name, rel in sorted(on_disk_packs.items(), key=lambda item: item[1]):
            if missing and name is not None and name in known_packs:
                _index_pack(index, backend, name, rel, listing, report)
                with index.guard():
                    missing -= _rows.existing(conn, list(missing))
    decoded = _read_records(backend, listing, known_records, report)
    # Recordings of one id are numbered by when they started, whatever order files list in;
    # a merged file after those it merged, so that its steps are indexed as its own.
    decoded.sort(key=lambda item: (min((_first_ns(r) for r in item[2]), default=0), len(item[2])))
    if decoded:
        with index.transaction() as tx:
            for rel, size, records in decoded:
                _index_records(tx, rel, size, records, where)
                report.records += 1
    gone = known_records - set(listing.records) if forget_missing else set()
    # The steps of a file gone go with it; those another file of the run holds (the file
    # merged from it, indexed while it was still there) are indexed again from that file.
    refill = _reread(backend, _siblings(index, gone, listing))
    with index.transaction() as tx:
        if forget_missing:
            for rel in gone:
                for table in ("steps", "span_steps"):
                    tx.execute(
                        f"DELETE FROM {table} WHERE record IN "
                        "(SELECT id FROM records WHERE path = ?)",
                        (rel,),
                    )
                tx.execute("DELETE FROM records WHERE path = ?", (rel,))
            for rel, size, records in refill:
                _index_records(tx, rel, size, records, where)
            tx.execute("DELETE FROM runs WHERE id NOT IN (SELECT run FROM records)")
        pins = read_pins(backend)
        tx.execute("UPDATE runs SET pinned = 0")
        tx.executemany(
            "UPDATE runs SET pinned = 1 WHERE name = ?", [(_rows.id_param(n),) for n in pins]
        )
    report.problems += _labels.read_files(index, backend, forget_missing=forget_missing)
    report.problems.extend(read_ledgers(index, backend, forget_missing=forget_missing))
    return report


def _reread(
    backend: Backend, files: dict[str, tuple[int, float]]
) -> list[tuple[str, int, list[Record]]]:
    """Record files indexed before, decoded again: (path, size, records); one gone or
    damaged since is left out (the next sync reads what replaced it; verify names damage)."""
    out = []
    for rel, (size, _) in sorted(files.items()):
        try:
            result = decode_records(backend.read(rel))
        except OSError:
            continue
        out.append((rel, size, result.records))
    return out


def _siblings(index: Index, gone: set[str], listing: Listing) -> dict[str, tuple[int, float]]:
    """The listed record files of the runs that the record files ``gone`` belonged to."""
    if not gone:
        return {}
    with index.guard():
        conn = index.conn()
        runs = {
            run
            for rel in gone
            for (run,) in conn.execute("SELECT run FROM records WHERE path = ?", (rel,))
        }
        paths = {
            path
            for run in runs
            for (path,) in conn.execute("SELECT path FROM records WHERE run = ?", (run,))
        }
    return {rel: listing.records[rel] for rel in paths - gone if rel in listing.records}


def _read_records(
    backend: Backend, listing: Listing, known: set[str], report: SyncReport
) -> list[tuple[str, int, list[Record]]]:
    """The record files listed that are not ``known``, decoded: (path, size, records). A
    file gone by the time it is read was merged into one published before it went: the
    store is listed again (``listing`` updated) for it."""
    where = backend.location
    decoded: list[tuple[str, int, list[Record]]] = []
    read = set(known)
    for _ in range(RELISTS):
        gone = False
        for rel, (size, _) in sorted(listing.records.items()):
            if rel in read:
                continue
            read.add(rel)
            try:
                result = decode_records(backend.read(rel))
            except FileNotFoundError:
                gone = True
                continue
            except OSError as exc:
                report.problems.append(
                    VerifyProblem("record", f"record file {where}/{rel}: {exc}", path=rel)
                )
                continue
            for problem in result.problems:
                report.problems.append(
                    VerifyProblem("record", f"record file {where}/{rel}: {problem}", path=rel)
                )
            decoded.append((rel, size, result.records))
        if not gone:
            break
        listing.records = list_files(backend).records
    return decoded


def _index_pack(
    index: Index, backend: Backend, name: str, rel: str, listing: Listing, report: SyncReport
) -> int:
    """Index the objects of one pack (those indexed elsewhere keep their place); 1 when it
    was read, 0 when it could not be (reported)."""
    size = listing.packs[rel][0]
    try:
        table = read_pack_table(backend, rel, size)
    except FileNotFoundError:
        return 0  # deleted since listed (by gc, or merged by its writer): nothing to index
    except (PackError, OSError) as exc:
        report.problems.append(
            VerifyProblem("pack", f"pack {backend.location}/{rel} cannot be read: {exc}", path=rel)
        )
        return 0
    with index.transaction() as tx:
        _rows.add_pack(tx.conn, name, size, table, move=False)
    return 1


def _first_ns(record: Record) -> int:
    times = [int(e["start_ns"]) for e in record.steps]
    if record.facts is not None and record.facts.start_ns:
        times.append(record.facts.start_ns)
    return min(times, default=0) or (1 << 62) + record.seq
