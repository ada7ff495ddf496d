"""Reading and writing the index's rows: plain SQL in, named dataclasses out."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from otel_replay.step import RunFacts
from otel_replay.store._pack import ENTRY
from otel_replay.store._types import RunInfo, RunStatus, StepInfo

if TYPE_CHECKING:  # runs lists without the records' decoder (and the codecs behind it)
    from otel_replay.store._imports import LedgerEntry
    from otel_replay.store._records import RunName, SpanStep
    from otel_replay.store._reports import ImportedFile

__all__ = [
    "Located",
    "RunRow",
    "StepRef",
    "add_pack",
    "ensure_run",
    "existing",
    "locate",
    "run_infos",
    "step_infos",
    "step_ref",
]


_CHUNK = 500
"""Digests per ``IN (...)`` query (SQLite allows at least 999 parameters)."""


def run_name_of(value: Any) -> str:
    """A run name or id read from the index (TEXT, or a BLOB when not valid UTF-8)."""
    return _text(value)


def _text(value: Any) -> str:
    """A run id read back: TEXT as it is, a BLOB (not valid UTF-8) decoded as it was made."""
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else str(value)


def hash_tag(digest: bytes) -> str:
    """A digest column read back as the ``sha256:<hex>`` the spans carry."""
    return "sha256:" + bytes(digest).hex()


def id_param(run_id: str) -> str | bytes:
    """A run id as a query parameter (a BLOB when it is not valid UTF-8)."""
    try:
        run_id.encode("utf-8")
        return run_id
    except UnicodeEncodeError:
        return run_id.encode("utf-8", "surrogatepass")


@dataclass(frozen=True, slots=True)
class Located:
    """Where an object is: its pack's name and its place in the pack."""

    pack: str
    kind: int
    frame_offset: int
    frame_size: int
    offset: int
    size: int


def existing(conn: sqlite3.Connection, digests: Sequence[bytes]) -> set[bytes]:
    """Those of ``digests`` the index holds."""
    found: set[bytes] = set()
    for at in range(0, len(digests), _CHUNK):
        part = digests[at : at + _CHUNK]
        marks = ",".join("?" * len(part))
        rows = conn.execute(f"SELECT digest FROM objects WHERE digest IN ({marks})", part)
        found.update(bytes(digest) for (digest,) in rows)
    return found


def packs_of(conn: sqlite3.Connection, digests: Sequence[bytes]) -> dict[bytes, str]:
    """The pack (name) the index locates each of ``digests`` in, for those it holds."""
    found: dict[bytes, str] = {}
    for at in range(0, len(digests), _CHUNK):
        part = digests[at : at + _CHUNK]
        marks = ",".join("?" * len(part))
        rows = conn.execute(
            "SELECT digest, packs.name FROM objects JOIN packs ON packs.id = objects.pack "
            f"WHERE digest IN ({marks})",
            part,
        )
        found.update((bytes(digest), pack) for digest, pack in rows)
    return found


def locate(conn: sqlite3.Connection, digest: bytes) -> Located | None:
    """Where the object ``digest`` is, or None."""
    row = conn.execute(
        "SELECT packs.name, kind, frame_offset, frame_size, offset, objects.size "
        "FROM objects JOIN packs ON packs.id = objects.pack WHERE digest = ?",
        (digest,),
    ).fetchone()
    return None if row is None else Located(*row)


def add_pack(conn: sqlite3.Connection, name: str, size: int, table: bytes, *, move: bool) -> None:
    """Index a pack and its objects (``table``: the pack's table, :func:`~._pack.entries`).
    An object already indexed elsewhere keeps its place, unless ``move`` (a repack, whose
    copy replaces the old one)."""
    conn.execute(
        "INSERT OR IGNORE INTO packs (name, size, objects) VALUES (?, ?, ?)",
        (name, size, len(table) // ENTRY.size),
    )
    (pack_id,) = conn.execute("SELECT id FROM packs WHERE name = ?", (name,)).fetchone()
    verb = "INSERT OR REPLACE" if move else "INSERT OR IGNORE"
    # The table's records are bound as they unpack, their fields in the table's order, the
    # pack the same for every row. In digest order: each page of the objects table is then
    # visited once, however many rows land on it (digests are random, so a pack's own order
    # touches the pages at random).
    conn.executemany(
        f"{verb} INTO objects (digest, kind, frame_offset, frame_size, offset, size, pack) "
        f"VALUES (?, ?, ?, ?, ?, ?, {pack_id})",
        sorted(ENTRY.iter_unpack(table), key=itemgetter(0)),  # digests compare as bytes
    )


_BATCH = 500
"""Digests per ``IN (...)`` query (SQLite allows 999 parameters at least)."""


def pack_objects(
    conn: sqlite3.Connection, name: str, digests: Sequence[bytes] | None
) -> list[tuple[bytes, int]]:
    """(digest, size) of the objects the index locates in pack ``name``: among ``digests``
    (the pack's own table, looked up by digest; in that order), or, when its file is gone (None), by
    scanning every object (there is no index by pack: it would cost a third of the file)."""
    pack = _pack_id(conn, name)
    if pack is None:
        return []
    if digests is None:
        rows = conn.execute("SELECT digest, size FROM objects WHERE pack = ?", (pack,))
        return [(bytes(digest), size) for digest, size in rows]
    sizes: dict[bytes, int] = {}
    for at in range(0, len(digests), _BATCH):
        batch = digests[at : at + _BATCH]
        marks = ",".join("?" * len(batch))
        sizes.update(
            (bytes(digest), size)
            for digest, size in conn.execute(
                f"SELECT digest, size FROM objects WHERE digest IN ({marks}) AND pack = ?",
                (*batch, pack),
            )
        )
    # In the pack's order (the order they were written): a repack keeps related objects
    # side by side, where zstd finds what they share.
    return [(digest, sizes[digest]) for digest in digests if digest in sizes]


def _pack_id(conn: sqlite3.Connection, name: str) -> int | None:
    row = conn.execute("SELECT id FROM packs WHERE name = ?", (name,)).fetchone()
    if row is None:
        return None
    (pack,) = row
    return int(pack)


def pack_known(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the index lists pack ``name`` (its writer committed it)."""
    return conn.execute("SELECT 1 FROM packs WHERE name = ?", (name,)).fetchone() is not None


def record_known(conn: sqlite3.Connection, path: str) -> bool:
    """Whether the index lists the record file at ``path``."""
    return conn.execute("SELECT 1 FROM records WHERE path = ?", (path,)).fetchone() is not None


def drop_objects(conn: sqlite3.Connection, name: str, digests: Sequence[bytes] | None) -> None:
    """Forget the objects indexed in pack ``name`` (among ``digests``, as for
    :func:`pack_objects`), keeping the pack's row: a pack that locates nothing."""
    pack = _pack_id(conn, name)
    if pack is None:
        return
    if digests is None:
        conn.execute("DELETE FROM objects WHERE pack = ?", (pack,))
        return
    for at in range(0, len(digests), _BATCH):
        batch = digests[at : at + _BATCH]
        marks = ",".join("?" * len(batch))
        conn.execute(f"DELETE FROM objects WHERE digest IN ({marks}) AND pack = ?", (*batch, pack))


def drop_pack(conn: sqlite3.Connection, name: str, digests: Sequence[bytes] | None) -> None:
    """Forget a pack and the objects indexed in it (among ``digests``, as for
    :func:`pack_objects`)."""
    drop_objects(conn, name, digests)
    conn.execute("DELETE FROM packs WHERE name = ?", (name,))


@dataclass(frozen=True, slots=True)
class RunRow:
    """A run's key columns: its row id, name and number among its id's recordings."""

    id: int
    name: str
    number: int


def ensure_run(
    conn: sqlite3.Connection,
    run_id: str,
    recording: str,
    facts: RunFacts | None,
    where: str,
    claimed: RunName | None = None,
) -> RunRow:
    """The run row of ``recording`` of ``run_id``, made when new. It takes the name its
    records ``claimed`` when that name is free; otherwise it is numbered after the id's
    earlier recordings and named ``<id>@<n>`` when the id is taken (logged once)."""
    key = id_param(run_id)
    row = conn.execute(
        "SELECT id, name, number FROM runs WHERE run_id = ? AND recording = ?",
        (key, recording),
    ).fetchone()
    if row is not None:
        found = _run_row(row)
        if facts is not None:
            _set_facts(conn, found.id, facts)
        return found
    if claimed is not None and not _name_taken(conn, claimed.name):
        name, number = claimed.name, claimed.number
    else:
        (number,) = conn.execute(
            "SELECT COALESCE(MAX(number), 0) + 1 FROM runs WHERE run_id = ?", (key,)
        ).fetchone()
        name = run_id if number == 1 else f"{run_id}@{number}"
        while _name_taken(conn, name):
            number += 1
            name = f"{run_id}@{number}"
        if number > 1:
            import logging  # noqa: PLC0415 - a verb that only reads starts without it

            logging.getLogger("otel_replay.store").warning(
                "otel-replay: run id %r is already in the store at %s; this recording is "
                "kept apart as run %r",
                run_id,
                where,
                name,
            )
    cursor = conn.execute(
        "INSERT INTO runs (name, run_id, recording, number) VALUES (?, ?, ?, ?)",
        (id_param(name), key, recording, number),
    )
    assert cursor.lastrowid is not None
    if facts is not None:
        _set_facts(conn, cursor.lastrowid, facts)
    return RunRow(cursor.lastrowid, name, number)


def _name_taken(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM runs WHERE name = ?", (id_param(name),)).fetchone()
    return row is not None


def _set_facts(conn: sqlite3.Connection, run: int, facts: RunFacts) -> None:
    conn.execute(
        "UPDATE runs SET mode = ?, started_ns = ?, commit_sha = ?, code_dirty = ?, seed = ?, "
        "parent = ? WHERE id = ?",
        (
            facts.mode,
            facts.start_ns or None,
            facts.commit,
            facts.code_dirty,
            facts.seed,
            facts.parent_run_id,
            run,
        ),
    )


def end_run(conn: sqlite3.Connection, run: int, end_ns: int, error_type: str | None) -> None:
    """Mark a run closed by its recorder."""
    conn.execute(
        "UPDATE runs SET ended_ns = ?, error_type = COALESCE(?, error_type) WHERE id = ?",
        (end_ns, error_type, run),
    )


STEP_COLUMNS = (
    "step_index, kind, provider, model, request_hash, request_size, response_hash, "
    "response_size, status_code, error_type, complete, start_ns, end_ns, tokens_in, "
    "tokens_out, trace_id, span_id"
)


def add_record(conn: sqlite3.Connection, path: str, run: int, size: int) -> int:
    """Index the record file at ``path`` (of run row ``run``); its row id."""
    conn.execute(
        "INSERT INTO records (path, run, size) VALUES (?, ?, ?) "
        "ON CONFLICT (path) DO UPDATE SET run = excluded.run, size = excluded.size",
        (path, run, size),
    )
    (record,) = conn.execute("SELECT id FROM records WHERE path = ?", (path,)).fetchone()
    return int(record)


def add_steps(
    conn: sqlite3.Connection, run: int, record: int, entries: Iterable[dict[str, Any]]
) -> None:
    """Index the steps of one record (a step stated again, by a merged record, is replaced)."""
    conn.executemany(
        f"INSERT OR REPLACE INTO steps (run, {STEP_COLUMNS}, record) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                run,
                e["index"],
                e["kind"],
                e["provider"],
                e["model"],
                bytes.fromhex(e["request"]),
                e["request_size"],
                None if e["response"] is None else bytes.fromhex(e["response"]),
                e["response_size"],
                e["status_code"],
                e["error_type"],
                bool(e["complete"]),
                e["start_ns"],
                e["end_ns"],
                e["tokens_in"],
                e["tokens_out"],
                e["trace_id"],
                e["span_id"],
                record,
            )
            for e in entries
        ],
    )


def add_span_steps(
    conn: sqlite3.Connection, run: int, record: int, steps: Iterable[SpanStep]
) -> None:
    """Index the step spans of one record whose steps it holds no bytes of."""
    conn.executemany(
        "INSERT OR REPLACE INTO span_steps (run, trace_id, span_id, step_index, kind, model, "
        "error_type, tokens_in, tokens_out, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                run,
                s.trace_id,
                s.span_id,
                s.index,
                s.kind,
                s.model,
                s.error_type,
                s.tokens_in,
                s.tokens_out,
                record,
            )
            for s in steps
        ],
    )


_SPAN_ONLY = """
FROM span_steps AS s
WHERE (s.step_index IS NULL OR NOT EXISTS (
    SELECT 1 FROM steps WHERE steps.run = s.run AND steps.step_index = s.step_index))
"""
"""The step spans of steps the store holds no bytes of (a step held twice counts once)."""

_SPAN_ONLY_TOTALS = (
    "SELECT s.run, COUNT(DISTINCT s.step_index) + COUNT(*) - COUNT(s.step_index), "
    "COUNT(s.error_type), SUM(s.tokens_in), SUM(s.tokens_out)" + _SPAN_ONLY
)


@dataclass(frozen=True, slots=True)
class _Totals:
    steps: int = 0
    errors: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None


def _add(a: int | None, b: int | None) -> int | None:
    return a if b is None else b if a is None else a + b


_RUN_QUERY = """
SELECT runs.id, runs.name, runs.run_id, runs.number, runs.mode,
       runs.started_ns, MIN(steps.start_ns), runs.ended_ns, MAX(steps.end_ns),
       runs.error_type, COUNT(steps.error_type), runs.commit_sha, runs.code_dirty, runs.seed,
       COUNT(steps.step_index), SUM(steps.tokens_in), SUM(steps.tokens_out),
       COALESCE(SUM(steps.request_size + steps.response_size), 0), runs.pinned, runs.parent
FROM runs LEFT JOIN steps ON steps.run = runs.id
WHERE EXISTS (SELECT 1 FROM records WHERE records.run = runs.id)
"""


def _models(conn: sqlite3.Connection, run: int) -> tuple[str, ...]:
    """The distinct models of a run's steps, those known by their spans only included, in
    first-use order (a span of another instrumentation has no index: it comes last)."""
    rows = conn.execute(
        "SELECT model FROM (SELECT model, step_index FROM steps WHERE run = ? "
        "UNION ALL SELECT s.model, COALESCE(s.step_index, 1 << 62)"
        + _SPAN_ONLY
        + "AND s.run = ?) WHERE model IS NOT NULL GROUP BY model ORDER BY MIN(step_index)",
        (run, run),
    )
    return tuple(model for (model,) in rows)


def _status(ended: bool, error_type: str | None) -> RunStatus:
    """``error`` when the application failed (the run's own error), not when a step failed
    and the application went on; ``incomplete`` when the run was never ended."""
    if not ended:
        return "incomplete"
    return "error" if error_type is not None else "ok"


def _bound(pick: Any, *values: int | None) -> int:
    known = [v for v in values if v]
    return int(pick(known)) if known else 0


_LISTED = "EXISTS (SELECT 1 FROM records WHERE records.run = runs.id)"
"""A run the index lists: one with a record file (a name reserved by a writer that has not
written yet is not)."""


def run_count(conn: sqlite3.Connection) -> int:
    """How many runs :func:`run_infos` lists."""
    # The runs that have a record file, counted from the records' index by run: a test of
    # each run for a record costs several times as much.
    (count,) = conn.execute("SELECT COUNT(DISTINCT run) FROM records").fetchone()
    return int(count)


def run_names(conn: sqlite3.Connection, prefix: str = "") -> list[str]:
    """The names of the runs :func:`run_infos` lists that start with ``prefix``, sorted by
    their UTF-8 bytes: read from the names' index, from ``prefix`` on and no further than
    the last that starts with it (a prefix costs what it matches, not what the store holds).
    """
    found: list[str] = []
    text = id_param(prefix)
    # Those stored as TEXT, then those stored as a BLOB (not valid UTF-8), which sort after
    # every TEXT one: each run from the prefix (of their type) on.
    starts = [text] if isinstance(text, str) else []
    for start in [*starts, prefix.encode("utf-8", "surrogatepass")]:
        rows = conn.execute(
            f"SELECT name FROM runs WHERE name >= ? AND {_LISTED} ORDER BY name", (start,)
        )
        for (name,) in rows:
            if isinstance(name, bytes) != isinstance(start, bytes):
                break
            shown = _text(name)
            if not shown.startswith(prefix):
                break
            found.append(shown)
    return found


_UNDATED_START = "COALESCE((SELECT MIN(start_ns) FROM steps WHERE steps.run = runs.id), ended_ns)"
"""When a run whose recorder gave no start began: at its first step, else at its end."""


def newest_runs(conn: sqlite3.Connection, limit: int) -> list[int]:
    """The row ids of the ``limit`` runs that started last. Their start is read from the
    run's own row (its recorder's word), else its first step, else its end: one look-up a
    run, never a scan of the steps."""
    # Only the newest are asked whether they are listed (a run is, unless its writer named
    # it and has not written its record yet, or was killed before it did): asking every run
    # costs more than sorting them. A few more than ``limit`` are read, more while too few
    # are listed.
    wanted = limit + 8
    while True:
        # The runs with a start of their own come newest first from runs_by_start, reading
        # ``wanted`` of them rather than sorting every run; those without (few: steps put
        # without their run's facts) are found through the same index and sorted apart.
        # The two are merged in SQLite's order.
        dated = conn.execute(
            "SELECT id, started_ns, name FROM runs WHERE started_ns IS NOT NULL "
            "ORDER BY started_ns DESC, name DESC LIMIT ?",
            (wanted,),
        ).fetchall()
        undated = conn.execute(
            f"SELECT id, {_UNDATED_START}, name FROM runs WHERE started_ns IS NULL "
            "ORDER BY 2 DESC, name DESC LIMIT ?",
            (wanted,),
        ).fetchall()
        newest = [row[0] for row in sorted(dated + undated, key=_newest, reverse=True)[:wanted]]
        marks = ",".join(str(run) for run in newest) or "NULL"
        listed = {run for (run,) in conn.execute(f"SELECT run FROM records WHERE run IN ({marks})")}
        found = [run for run in newest if run in listed]
        if len(found) >= limit or len(newest) < wanted:
            return found[:limit]
        wanted *= 2


def _newest(row: Sequence[Any]) -> tuple[bool, int, bool, bytes]:
    """A run's (id, start, name) row ordered as SQLite orders start, then name: a NULL start
    below any, a TEXT name below any BLOB, each compared by its bytes."""
    _, start, name = row
    if isinstance(name, bytes):
        return (start is not None, start or 0, True, name)
    return (start is not None, start or 0, False, name.encode("utf-8", "surrogatepass"))


def run_infos(
    conn: sqlite3.Connection, name: str | None = None, *, ids: Sequence[int] | None = None
) -> list[RunInfo]:
    """Every run (oldest first), the one named ``name``, or those of row ``ids``."""
    params: tuple[object, ...] = ()
    if ids is not None:
        marks = ",".join(str(int(run)) for run in ids) or "NULL"
        where, which = f"AND runs.id IN ({marks}) ", f"AND s.run IN ({marks}) "
    elif name is None:
        where, which = "", ""
    else:
        where, params = "AND runs.name = ? ", (id_param(name),)
        which = "AND s.run = (SELECT id FROM runs WHERE name = ?) "
    rows = conn.execute(_RUN_QUERY + where + "GROUP BY runs.id", params).fetchall()
    totals = conn.execute(_SPAN_ONLY_TOTALS + which + "GROUP BY s.run", params).fetchall()
    span_only = {run: _Totals(*counts) for run, *counts in totals}
    infos = []
    for (
        run,
        run_name,
        recorded_id,
        number,
        mode,
        started_ns,
        first_step_ns,
        ended_ns,
        last_step_ns,
        error_type,
        error_steps,
        commit,
        code_dirty,
        seed,
        step_count,
        tokens_in,
        tokens_out,
        size,
        pinned,
        parent,
    ) in rows:
        # no steps, no start: its end
        start = _bound(min, started_ns, first_step_ns) or _bound(max, ended_ns)
        more = span_only.get(run, _Totals())
        infos.append(
            RunInfo(
                run_id=_text(run_name),
                recorded_id=_text(recorded_id),
                recording=number,
                mode=mode,
                start_ns=start,
                end_ns=_bound(max, start, ended_ns, last_step_ns),
                status=_status(ended_ns is not None, error_type),
                error_type=error_type,
                error_steps=error_steps + more.errors,
                commit=commit,
                code_dirty=None if code_dirty is None else bool(code_dirty),
                seed=seed,
                step_count=step_count + more.steps,
                tokens_in=_add(tokens_in, more.tokens_in),
                tokens_out=_add(tokens_out, more.tokens_out),
                bytes=size,
                pinned=bool(pinned),
                models=_models(conn, run),
                parent_run_id=parent,
            )
        )
    infos.sort(key=lambda info: (info.start_ns, info.run_id))
    return infos


def run_facts(conn: sqlite3.Connection, run: int) -> RunFacts | None:
    """The facts its recorder stated for run row ``run`` (None when it stated none)."""
    row = conn.execute(
        "SELECT run_id, mode, seed, commit_sha, code_dirty, started_ns, parent FROM runs "
        "WHERE id = ?",
        (run,),
    ).fetchone()
    if row is None:
        return None
    run_id, mode, seed, commit, code_dirty, started_ns, parent = row
    if mode is None:
        return None
    return RunFacts(
        run_id=_text(run_id),
        mode=mode,
        seed=seed,
        commit=commit,
        code_dirty=None if code_dirty is None else bool(code_dirty),
        start_ns=started_ns or 0,
        parent_run_id=parent,
    )


def run_row(conn: sqlite3.Connection, name: str) -> RunRow | None:
    """The row of the run named ``name``, or None."""
    row = conn.execute(
        "SELECT id, name, number FROM runs WHERE name = ?", (id_param(name),)
    ).fetchone()
    return None if row is None else _run_row(row)


def recording_of(conn: sqlite3.Connection, run: RunRow) -> str:
    """The recording that wrote ``run``."""
    (recording,) = conn.execute("SELECT recording FROM runs WHERE id = ?", (run.id,)).fetchone()
    return str(recording)


def imported_files(conn: sqlite3.Connection) -> list[ImportedFile]:
    """The files imported so far, oldest first."""
    from otel_replay.store._reports import ImportedFile  # noqa: PLC0415 - only an import asks

    rows = conn.execute(
        "SELECT path, size, mtime_ns, head, digest FROM imported_files ORDER BY read_ns"
    ).fetchall()
    return [ImportedFile(*row) for row in rows]


def note_imported(conn: sqlite3.Connection, entries: Iterable[LedgerEntry], ledger: str) -> None:
    """Index the entries of the ledger file ``ledger``: a file seen again keeps its latest
    reading."""
    conn.executemany(
        "INSERT INTO imported_files (path, size, mtime_ns, head, digest, read_ns) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (size, mtime_ns, head) DO UPDATE SET "
        "path = excluded.path, digest = excluded.digest, read_ns = excluded.read_ns "
        "WHERE excluded.read_ns >= imported_files.read_ns",
        [
            (e.file.path, e.file.size, e.file.mtime_ns, e.file.head, e.file.digest, e.read_ns)
            for e in entries
        ],
    )
    conn.execute("INSERT OR IGNORE INTO ledgers (name) VALUES (?)", (ledger,))


def ledgers(conn: sqlite3.Connection) -> list[str]:
    """The ledger files read into ``imported_files``."""
    return [name for (name,) in conn.execute("SELECT name FROM ledgers")]


def forget_ledgers(conn: sqlite3.Connection, names: Iterable[str]) -> None:
    """Forget that the ledger files ``names`` were read (they are gone)."""
    conn.executemany("DELETE FROM ledgers WHERE name = ?", [(name,) for name in names])


def _run_row(row: Sequence[Any]) -> RunRow:
    """A run row read as ``SELECT id, name, number``."""
    run, name, number = row
    return RunRow(run, _text(name), number)


def _step_info(name: str, row: Sequence[Any]) -> StepInfo:
    """A step read as ``SELECT`` :data:`STEP_COLUMNS`."""
    (
        index,
        kind,
        provider,
        model,
        request,
        request_size,
        response,
        response_size,
        status_code,
        error_type,
        complete,
        start_ns,
        end_ns,
        tokens_in,
        tokens_out,
        trace_id,
        span_id,
    ) = row
    return StepInfo(
        run_id=name,
        index=index,
        kind=kind,
        provider=provider,
        model=model,
        request_hash=hash_tag(request),
        request_size=request_size,
        response_hash=None if response is None else hash_tag(response),
        response_size=response_size,
        status_code=status_code,
        error_type=error_type,
        complete=bool(complete),
        start_ns=start_ns,
        end_ns=end_ns,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        trace_id=int(trace_id, 16),
        span_id=int(span_id, 16),
    )


def step_infos(conn: sqlite3.Connection, run: RunRow, index: int | None = None) -> list[StepInfo]:
    """The steps of a run in index order (or only step ``index``)."""
    sql = f"SELECT {STEP_COLUMNS} FROM steps WHERE run = ?"
    params: tuple[object, ...] = (run.id,)
    if index is not None:
        sql += " AND step_index = ?"
        params += (index,)
    rows = conn.execute(sql + " ORDER BY step_index", params)
    return [_step_info(run.name, r) for r in rows]


@dataclass(frozen=True, slots=True)
class StepRef:
    """What reading a step's data needs: its index row and the record file stating it."""

    info: StepInfo
    record: str


def step_ref(conn: sqlite3.Connection, run: RunRow, index: int) -> StepRef | None:
    """The step ``index`` of a run, with its record file, or None."""
    found = step_refs(conn, run, index)
    return found[0] if found else None


def step_refs(conn: sqlite3.Connection, run: RunRow, index: int | None = None) -> list[StepRef]:
    """The steps of a run in index order (or only step ``index``), with their record files."""
    sql = (
        f"SELECT {STEP_COLUMNS}, records.path FROM steps "
        "JOIN records ON records.id = steps.record WHERE steps.run = ?"
    )
    params: tuple[object, ...] = (run.id,)
    if index is not None:
        sql += " AND step_index = ?"
        params += (index,)
    rows = conn.execute(sql + " ORDER BY step_index", params)
    return [StepRef(_step_info(run.name, step), record) for *step, record in rows]


def sweeps(conn: sqlite3.Connection) -> int:
    """How many gc sweeps have removed objects from this store."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'sweeps'").fetchone()
    if row is None:
        return 0
    (count,) = row
    return int(count)


def count_sweep(conn: sqlite3.Connection) -> None:
    """Note one more sweep (writers then forget which objects they knew were stored)."""
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('sweeps', 1) "
        "ON CONFLICT (key) DO UPDATE SET value = value + 1"
    )


def run_records(conn: sqlite3.Connection, run: int) -> list[str]:
    """The record files of a run, by path."""
    rows = conn.execute("SELECT path FROM records WHERE run = ? ORDER BY path", (run,))
    return [path for (path,) in rows]
