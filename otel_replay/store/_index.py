"""The SQLite index: runs (with their streams) and their steps.

WAL mode (readers never block the writer), ``synchronous=FULL`` (a committed flush survives
power loss), a 30 s busy timeout (several processes record into one store; their commits
queue), one connection per thread. 512-byte pages, SQLite's smallest: a step row is ~120
bytes (see ``_rows.SCHEMA``), and most stores are small, where 4 KiB pages would mostly hold
empty space (the index of one 30-step run: 6 KB instead of 24 KB). Measured at 100,000
steps, size and read speed match 4 KiB pages and bulk writes are ~15% slower, which a flush's
fsyncs dwarf.

The index is a cache of what the packs' records say, except for ``pinned`` (mirrored from the
``pins/`` marker files). Every SQLite failure comes out as a store error naming the file:
CorruptIndexError for a damaged file, StoreNotWritableError, or StoreError when locked.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from otel_replay.errors import CorruptIndexError, StoreError, StoreNotWritableError
from otel_replay.store._rows import (
    RUN_AGGREGATES,
    RUN_COLUMNS,
    SCHEMA,
    SCHEMA_VERSION,
    STEP_COLUMNS,
    UPDATE_RUN,
    StepRef,
    compact_ddl,
    dump_streams,
    key_range,
    parse_streams,
    run_base,
    run_info,
    run_slots,
    step_info,
    step_ref,
    stored_row,
)
from otel_replay.store._types import RunInfo, StepInfo

__all__ = ["Index"]

_PAGE_SIZE = 512
_BUSY_MS = 30_000


class Index:
    """The index file at ``path``; one SQLite connection per thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        try:
            with self._guard():
                self._check_size()
                self._init_schema(self._conn())
        except BaseException:
            self.close()
            raise

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "readonly" in text or "unable to open" in text:
                raise StoreNotWritableError(f"cannot write index {self.path}: {text}") from None
            if "locked" in text or "busy" in text:
                raise StoreError(
                    f"index {self.path} is locked by another process: {text}"
                ) from None
            raise self._corrupt(text) from None
        except sqlite3.DatabaseError as exc:
            raise self._corrupt(str(exc)) from None

    def _corrupt(self, text: str) -> CorruptIndexError:
        return CorruptIndexError(
            f"index {self.path} cannot be read ({text}); nothing was changed. "
            "`otel-replay verify --rebuild-index` (Store.rebuild) rebuilds it from the packs"
        )

    def _check_size(self) -> None:
        """A truncated file (with no WAL to complete it) is reported before SQLite trips."""
        wal = self.path.with_name(self.path.name + "-wal")
        if not self.path.exists() or (wal.exists() and wal.stat().st_size):
            return
        size = self.path.stat().st_size
        if size == 0:
            return
        with open(self.path, "rb") as handle:
            header = handle.read(100)
        if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
            raise self._corrupt("not an SQLite database")
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(header[28:32], "big")
        if pages and size < pages * page_size:
            raise self._corrupt(f"truncated: {size} bytes, expected {pages * page_size}")

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StoreError(f"index {self.path} is closed")
            conn = sqlite3.connect(
                self.path, timeout=_BUSY_MS / 1000, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout={_BUSY_MS}")
            conn.execute("PRAGMA synchronous=FULL")
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            conn.execute(f"PRAGMA page_size={_PAGE_SIZE}")
            conn.execute("PRAGMA journal_mode=WAL")
            with self._transaction(conn):
                if conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                    for statement in SCHEMA.split(";"):
                        if statement.strip():  # stored as written: keep the header page small
                            conn.execute(compact_ddl(statement))
                    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            version = SCHEMA_VERSION
        if version != SCHEMA_VERSION:
            raise CorruptIndexError(
                f"index {self.path} has schema version {version}; this otel-replay reads "
                f"{SCHEMA_VERSION}. Upgrade otel-replay, or rebuild it with "
                "`otel-replay verify --rebuild-index`"
            )
        conn.execute("SELECT 1 FROM runs, steps LIMIT 1").fetchall()

    @contextlib.contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``): committed on success, else rolled back."""
        with self._guard(), self._transaction(self._conn()) as conn:
            yield conn

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        """Rows of a read query."""
        with self._guard():
            return self._conn().execute(sql, params).fetchall()

    # -- writes ------------------------------------------------------------------------

    @staticmethod
    def add_run(conn: sqlite3.Connection, run_id: str, facts: Any | None) -> int:
        """Create the run if new, merge span facts (times, error, commit, seed) into it, and
        return its slot."""
        lo, hi = run_slots(run_id)
        taken = conn.execute("SELECT slot, id FROM runs WHERE slot BETWEEN ? AND ?", (lo, hi))
        used: dict[str, int] = {other: slot for slot, other in taken}
        slot = used.get(run_id)
        if slot is None:
            free = sorted(set(range(lo, hi + 1)) - set(used.values()))
            if not free:
                raise StoreError(
                    f"the index has no free slot for run {run_id!r}: {len(used)} other run ids "
                    "share its slots; record under another run id"
                )
            slot = free[0]
            conn.execute(
                "INSERT INTO runs(slot, id, span_error, steps, step_errors, tokens_in,"
                " tokens_out, bytes, pinned) VALUES (?, ?, 0, 0, 0, 0, 0, 0, 0)",
                (slot, run_id),
            )
        if facts is not None:
            conn.execute(
                "UPDATE runs SET start_ns = min(coalesce(start_ns, :s), coalesce(:s, start_ns)),"
                " end_ns = max(coalesce(end_ns, :e), coalesce(:e, end_ns)),"
                " span_error = span_error OR :err, commit_sha = coalesce(:c, commit_sha),"
                " seed = coalesce(:seed, seed) WHERE slot = :slot",
                {
                    "s": facts.start_ns,
                    "e": facts.end_ns,
                    "err": int(facts.error),
                    "c": facts.commit,
                    "seed": facts.seed,
                    "slot": slot,
                },
            )
        return int(slot)

    @staticmethod
    def add_steps(
        conn: sqlite3.Connection, slot: int, stream: int, rows: Iterable[tuple[Any, ...]]
    ) -> None:
        """Insert (or replace: last write wins) rows from ``step_row`` for the run at
        ``slot``, in the stream numbered ``stream`` (see :meth:`set_stream`), relative to the
        run's trace id, provider, model and start, each set from the first rows that have one
        (``_rows``). A run's first steps give it its ``num``."""
        rows = list(rows)
        if not rows:
            return
        num, *known = conn.execute(
            "SELECT num, trace_id, provider, model, base_ns FROM runs WHERE slot = ?", (slot,)
        ).fetchone()
        if num is None:
            (top,) = conn.execute("SELECT max(key) FROM steps").fetchone()
            num = 0 if top is None else (top >> 32) + 1
            conn.execute("UPDATE runs SET num = ? WHERE slot = ?", (num, slot))
        base = run_base(tuple(known), rows)
        if base != tuple(known):
            conn.execute(
                "UPDATE runs SET trace_id = ?, provider = ?, model = ?, base_ns = ? WHERE slot = ?",
                (*base, slot),
            )
        conn.executemany(
            f"INSERT OR REPLACE INTO steps VALUES ({', '.join('?' * 21)})",
            (stored_row((num << 32) | row[0], stream, row, base) for row in rows),
        )

    @staticmethod
    def set_stream(conn: sqlite3.Connection, slot: int, stream: int, committed: int) -> int:
        """Record that the stream's objects below ``committed`` are durable and indexed; the
        stream's number within the run at ``slot`` (0 for its first)."""
        (text,) = conn.execute("SELECT streams FROM runs WHERE slot = ?", (slot,)).fetchone()
        streams = parse_streams(text)
        for number, entry in enumerate(streams):
            if entry is not None and entry[0] == stream:
                if committed <= entry[1]:
                    return number
                entry[1] = committed
                break
        else:
            number = len(streams)
            streams.append([stream, committed])
        conn.execute("UPDATE runs SET streams = ? WHERE slot = ?", (dump_streams(streams), slot))
        return number

    @staticmethod
    def refresh_run(conn: sqlite3.Connection, slot: int) -> None:
        """Recompute the step aggregates of the run at ``slot``."""
        num, model, base = conn.execute(
            "SELECT num, model, base_ns FROM runs WHERE slot = ?", (slot,)
        ).fetchone()
        lo, hi = key_range(num)
        n, errors, tin, tout, size, first, last, models = conn.execute(
            RUN_AGGREGATES, {"lo": lo, "hi": hi, "model": model, "base": base}
        ).fetchone()
        conn.execute(
            UPDATE_RUN,
            {
                "slot": slot,
                "n": n,
                "errors": errors,
                "tin": tin,
                "tout": tout,
                "bytes": size,
                "models": models,
                "first": first,
                "last": last,
            },
        )

    @staticmethod
    def _find(conn: sqlite3.Connection, run_id: str, columns: str) -> Any:
        """The ``columns`` of the row of ``run_id``, or None."""
        return conn.execute(
            f"SELECT {columns} FROM runs WHERE slot BETWEEN ? AND ? AND id = ?",
            (*run_slots(run_id), run_id),
        ).fetchone()

    @staticmethod
    def drop_stream(conn: sqlite3.Connection, run_id: str, stream: int) -> None:
        """Forget a stream and its steps (it is gone from the packs); then its run if that
        was its last stream."""
        row = Index._find(conn, run_id, "slot, num, streams")
        if row is None:
            return
        slot, num = row[0], row[1]
        lo, hi = key_range(num)
        streams = parse_streams(row[2])
        for number, entry in enumerate(streams):
            if entry is not None and entry[0] == stream:
                conn.execute(
                    "DELETE FROM steps WHERE key BETWEEN ? AND ? AND stream = ?", (lo, hi, number)
                )
                streams[number] = None  # the others keep their numbers
        if all(entry is None for entry in streams):
            conn.execute("DELETE FROM steps WHERE key BETWEEN ? AND ?", (lo, hi))
            conn.execute("DELETE FROM runs WHERE slot = ?", (slot,))
            return
        left = conn.execute("SELECT 1 FROM steps WHERE key BETWEEN ? AND ? LIMIT 1", (lo, hi))
        conn.execute(
            "UPDATE runs SET streams = ?, num = ? WHERE slot = ?",
            (dump_streams(streams), num if left.fetchone() else None, slot),
        )
        Index.refresh_run(conn, slot)

    def set_pinned(self, run_id: str, pinned: bool) -> None:
        """Mirror a pin marker into the index."""
        with self.write() as conn:
            conn.execute(
                "UPDATE runs SET pinned = ? WHERE slot BETWEEN ? AND ? AND id = ?",
                (int(pinned), *run_slots(run_id), run_id),
            )

    def delete_runs(self, run_ids: Iterable[str]) -> None:
        """Remove runs, their streams and steps."""
        with self.write() as conn:
            for run_id in run_ids:
                row = self._find(conn, run_id, "slot, num")
                if row is not None:
                    conn.execute("DELETE FROM steps WHERE key BETWEEN ? AND ?", key_range(row[1]))
                    conn.execute("DELETE FROM runs WHERE slot = ?", (row[0],))

    # -- reads -------------------------------------------------------------------------

    def _locate(self, run_id: str) -> tuple[int, int | None] | None:
        """The slot and num of ``run_id``, or None."""
        with self._guard():
            row = self._find(self._conn(), run_id, "slot, num")
        return None if row is None else (row[0], row[1])

    def runs(self) -> list[RunInfo]:
        """Every run, oldest first."""
        rows = self.query(f"SELECT {RUN_COLUMNS} FROM runs ORDER BY start_ns, id")
        return [run_info(row) for row in rows]

    def run(self, run_id: str) -> RunInfo | None:
        """One run, or None."""
        with self._guard():
            row = self._find(self._conn(), run_id, RUN_COLUMNS)
        return None if row is None else run_info(row)

    def steps(self, run_id: str) -> list[StepInfo]:
        """The steps of a run, by index."""
        found = self._locate(run_id)
        if found is None or found[1] is None:
            return []
        lo, hi = key_range(found[1])
        rows = self.query(
            f"SELECT {STEP_COLUMNS} FROM steps AS s JOIN runs AS r ON r.slot = ?"
            " WHERE s.key BETWEEN ? AND ? ORDER BY s.key",
            (found[0], lo, hi),
        )
        return [step_info(run_id, row) for row in rows]

    def step(self, run_id: str, index: int) -> StepInfo | None:
        """One step, or None."""
        found = self._locate(run_id)
        if found is None or found[1] is None or not 0 <= index <= 0xFFFFFFFF:
            return None
        rows = self.query(
            f"SELECT {STEP_COLUMNS} FROM steps AS s JOIN runs AS r ON r.slot = ? WHERE s.key = ?",
            (found[0], (found[1] << 32) | index),
        )
        return step_info(run_id, rows[0]) if rows else None

    _REF = (
        "SELECT s.key, s.stream, s.req_oid, s.req_oid + s.resp_delta,"
        " s.req_oid + s.rec_delta, s.req_hash, s.resp_hash FROM steps AS s"
    )

    def step_ref(self, run_id: str, index: int) -> StepRef | None:
        """Where one step's bodies live, or None."""
        found = self._locate(run_id)
        if found is None or found[1] is None or not 0 <= index <= 0xFFFFFFFF:
            return None
        (text,) = self.query("SELECT streams FROM runs WHERE slot = ?", (found[0],))[0]
        rows = self.query(self._REF + " WHERE s.key = ?", ((found[1] << 32) | index,))
        return step_ref(run_id, rows[0], parse_streams(text)) if rows else None

    def step_refs(self) -> list[StepRef]:
        """Where the bodies of every step live, by run."""
        runs = {
            num: (run_id, parse_streams(text))
            for num, run_id, text in self.query(
                "SELECT num, id, streams FROM runs WHERE num IS NOT NULL"
            )
        }
        refs: list[StepRef] = []
        for row in self.query(self._REF + " ORDER BY s.key"):
            run = runs.get(row[0] >> 32)
            if run is not None:  # a step whose run is gone (damage) has nothing to check against
                refs.append(step_ref(run[0], row, run[1]))
        return refs

    def streams(self, run_id: str | None = None) -> list[tuple[str, int, int]]:
        """``(run, stream, committed)`` for one run or all (by run, then stream id)."""
        if run_id is None:
            rows = self.query("SELECT id, streams FROM runs ORDER BY num, id")
        else:
            with self._guard():
                found = self._find(self._conn(), run_id, "id, streams")
            rows = [] if found is None else [found]
        return [
            (run, stream, committed)
            for run, text in rows
            for stream, committed in sorted(e for e in parse_streams(text) if e is not None)
        ]

    def close(self) -> None:
        """Close every connection this index opened (the last one checkpoints the WAL)."""
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        for conn in connections:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._local = threading.local()
