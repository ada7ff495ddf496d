"""The SQLite index: a cache of what the packs and records say, for fast lookups; every
SQLite failure comes out as a store error naming the file."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from otel_replay.errors import CorruptIndexError, StoreError, StoreFullError, StoreNotWritableError

__all__ = ["SCHEMA", "SCHEMA_VERSION", "Index", "OutdatedIndexError"]

SCHEMA_VERSION = 13
_BUSY_MS = 30_000
_SQLITE_FULL, _SQLITE_IOERR = 13, 10
_LOW_SPACE = 1 << 20
"""Free bytes under which an I/O error of SQLite's is taken for a full device."""

SCHEMA = """
CREATE TABLE runs (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,   -- its id, or '<id>@<n>' for a reused id's n-th recording
    run_id      TEXT NOT NULL,          -- the id as recorded (a BLOB when it is not valid UTF-8)
    recording   TEXT NOT NULL,          -- the recorder's id: one open store, one process
    number      INTEGER NOT NULL,       -- 1 for the first recording of run_id, then 2, 3...
    mode        TEXT,                   -- record, replay or fork
    parent      TEXT,                   -- the run a replay or fork re-executed (NULL: none)
    started_ns  INTEGER,                -- when the run started, as its recorder said
    ended_ns    INTEGER,                -- when its recorder closed it (NULL: cut off, or recording)
    error_type  TEXT,                   -- the run's own error (its run() block raised)
    commit_sha  TEXT,
    code_dirty  INTEGER,
    seed        INTEGER,
    pinned      INTEGER NOT NULL DEFAULT 0,
    UNIQUE (run_id, recording)
);
CREATE INDEX runs_by_start ON runs (started_ns);  -- the newest runs without a sort of all
CREATE TABLE steps (
    run           INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_index    INTEGER NOT NULL,
    kind          TEXT NOT NULL,        -- llm, http, ...
    provider      TEXT,
    model         TEXT,
    request_hash  BLOB NOT NULL,        -- sha256 of the exact request body (32 bytes)
    request_size  INTEGER NOT NULL,
    response_hash BLOB,                 -- NULL: no response came
    response_size INTEGER NOT NULL,
    status_code   INTEGER,
    error_type    TEXT,
    complete      INTEGER NOT NULL,     -- 0: the response was cut short
    start_ns      INTEGER NOT NULL,
    end_ns        INTEGER NOT NULL,
    tokens_in     INTEGER,
    tokens_out    INTEGER,
    trace_id      TEXT NOT NULL,
    span_id       TEXT NOT NULL,
    record        INTEGER NOT NULL REFERENCES records (id) ON DELETE CASCADE,
                                        -- the record file holding its headers and timing
    PRIMARY KEY (run, step_index)
) WITHOUT ROWID;
CREATE TABLE span_steps (
    -- the step spans of a record whose steps it holds no bytes of (imported semantic)
    run         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    trace_id    TEXT NOT NULL,
    span_id     TEXT NOT NULL,
    step_index  INTEGER,                -- NULL: another instrumentation's span, imported
    kind        TEXT NOT NULL,
    model       TEXT,
    error_type  TEXT,
    tokens_in   INTEGER,
    tokens_out  INTEGER,
    record      INTEGER NOT NULL REFERENCES records (id) ON DELETE CASCADE,
    PRIMARY KEY (run, trace_id, span_id)
) WITHOUT ROWID;
CREATE TABLE records (
    id     INTEGER PRIMARY KEY,
    path   TEXT NOT NULL UNIQUE,        -- a record file under runs/
    run    INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    size   INTEGER NOT NULL
);
CREATE INDEX records_by_run ON records (run);
CREATE TABLE packs (
    id      INTEGER PRIMARY KEY,
    name    TEXT NOT NULL UNIQUE,       -- sha256 hex of the pack file: objects/<aa>/<name>.pack
    size    INTEGER NOT NULL,
    objects INTEGER NOT NULL
);
CREATE TABLE objects (
    digest       BLOB PRIMARY KEY,      -- sha256 of the object's content
    kind         INTEGER NOT NULL,      -- 0 chunk, 1 manifest
    pack         INTEGER NOT NULL REFERENCES packs (id),
    frame_offset INTEGER NOT NULL,
    frame_size   INTEGER NOT NULL,
    offset       INTEGER NOT NULL,      -- in the frame's content
    size         INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE imported_files (             -- what the ledger files under imports/ name
    path      TEXT NOT NULL,            -- the file as named when it was read
    size      INTEGER NOT NULL,         -- bytes read
    mtime_ns  INTEGER NOT NULL,
    head      BLOB NOT NULL,            -- sha256 of its first 64 KiB: a renamed file is known
    digest    BLOB NOT NULL,            -- sha256 of all the bytes read
    read_ns   INTEGER NOT NULL,         -- when it was imported
    PRIMARY KEY (size, mtime_ns, head)
) WITHOUT ROWID;
CREATE TABLE labels (                  -- what the files under labels/ say (otel-replay triage)
    run        INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_index INTEGER,                 -- NULL: the run's own label
    category   TEXT NOT NULL,           -- replay.failure.category
    severity   TEXT NOT NULL,           -- replay.failure.severity
    rule       TEXT NOT NULL,           -- the triage rule that found it
    reason     TEXT NOT NULL            -- what happened, on one line
);
CREATE INDEX labels_by_run ON labels (run);
CREATE TABLE label_files (
    path   TEXT PRIMARY KEY,            -- labels/<key>.json, as last read into labels
    run    INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    size   INTEGER NOT NULL,
    mtime  REAL                         -- NULL: written here, its time not read yet
) WITHOUT ROWID;
CREATE TABLE ledgers (
    name  TEXT PRIMARY KEY              -- a ledger file under imports/ read into imported_files
) WITHOUT ROWID;
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,             -- 'sweeps': how many gc sweeps have removed objects
    value INTEGER NOT NULL
);
"""


class OutdatedIndexError(CorruptIndexError):
    """The index was made by an earlier otel-replay with another schema: a cache to rebuild."""


class Index:
    """The index file at ``path`` (``":memory:"`` for a throw-away one); one SQLite
    connection per thread. ``read_only`` opens an existing file immutable. ``holder`` says
    whose index it is, for messages (``the store at PATH``)."""

    def __init__(
        self, path: Path | str, *, read_only: bool = False, holder: str | None = None
    ) -> None:
        self.path = path
        self.holder = holder or f"the index {path}"
        self.read_only = read_only
        self.rebuilt = False
        """Set by the store when this index replaced an outdated one, and on opening an empty
        file: the caller reads the store's files into it."""
        self._memory = str(path) == ":memory:"
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._shared: sqlite3.Connection | None = None
        self._closed = False
        try:
            with self.guard():
                if not self._memory:
                    self._check_file(Path(path))
                self._init_schema(self.conn())
        except BaseException:
            self.close()
            raise

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Turn SQLite failures into store errors naming the file."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if self._no_space(exc):
                raise StoreFullError(
                    f"no space left on the device holding {self.holder} "
                    f"(writing {self.path}: {text})"
                ) from None
            if "readonly" in text or "unable to open" in text:
                raise StoreNotWritableError(f"cannot write index {self.path}: {text}") from None
            if "locked" in text or "busy" in text:
                raise StoreError(
                    f"index {self.path} is locked by another process: {text}"
                ) from None
            raise self._corrupt(text) from None
        except sqlite3.DatabaseError as exc:
            raise self._corrupt(str(exc)) from None

    def _no_space(self, exc: sqlite3.Error) -> bool:
        """Whether SQLite failed for want of space: SQLITE_FULL, or an I/O error (growing the
        WAL index file) while the device has next to nothing free."""
        code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
        primary = None if code is None else code & 0xFF
        if primary == _SQLITE_FULL or "database or disk is full" in str(exc):
            return True
        if self._memory or not (primary == _SQLITE_IOERR or "disk I/O error" in str(exc)):
            return False
        try:
            import shutil  # noqa: PLC0415 (a reader never asks)

            return shutil.disk_usage(Path(self.path).parent).free < _LOW_SPACE
        except OSError:
            return False

    def _corrupt(self, text: str) -> CorruptIndexError:
        return CorruptIndexError(
            f"index {self.path} cannot be read ({text}); nothing was changed. "
            "`otel-replay verify --rebuild-index` (Store.rebuild) rebuilds it from the packs"
        )

    def _check_file(self, path: Path) -> None:
        """A damaged file (not SQLite, or truncated with no WAL to complete it) is named
        before SQLite opens it, which would add files beside it; an empty one is ``rebuilt``."""
        wal = path.with_name(path.name + "-wal")
        if not path.exists() or (wal.exists() and wal.stat().st_size):
            return
        size = path.stat().st_size
        if size == 0:
            # Cut off before its first commit (or emptied): it knows nothing, so the store's
            # files are read into it, as into a lost one, not taken for an empty store.
            self.rebuilt = True
            return
        with open(path, "rb") as handle:
            header = handle.read(100)
        if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
            raise self._corrupt("not an SQLite database")
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(header[28:32], "big")
        if pages and size < pages * page_size:
            raise self._corrupt(f"truncated: {size} bytes, expected {pages * page_size}")

    def conn(self) -> sqlite3.Connection:
        """This thread's connection."""
        if self._memory:  # one database: every thread shares the one connection
            if self._shared is None:
                self._shared = self._connect()
            return self._shared
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    def _connect(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"index {self.path} is closed")
        if self.read_only and not self._memory:
            target = f"file:{Path(self.path).resolve().as_posix()}?immutable=1"
            conn = sqlite3.connect(target, uri=True, isolation_level=None, check_same_thread=False)
        else:
            conn = sqlite3.connect(
                self.path, timeout=_BUSY_MS / 1000, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout={_BUSY_MS}")
            conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        with self._lock:
            self._connections.append(conn)
        return conn

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        if version == 0 and not self.read_only:
            # Pages freed by gc and merges go back to the file system (``vacuum``).
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
            if not self._memory:
                conn.execute("PRAGMA journal_mode=WAL")
            with self.transaction() as tx:
                (current,) = tx.execute("PRAGMA user_version").fetchone()
                if current == 0:
                    tx.executescript_in_tx(SCHEMA)
                    tx.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            version = SCHEMA_VERSION
        if version != SCHEMA_VERSION:
            error = OutdatedIndexError if 0 < version < SCHEMA_VERSION else CorruptIndexError
            raise error(
                f"index {self.path} has schema version {version}; this otel-replay reads "
                f"{SCHEMA_VERSION}. Rebuild it with `otel-replay verify --rebuild-index` "
                "(nothing was changed)"
            )

    @contextlib.contextmanager
    def transaction(self, *, checked: bool = True) -> Iterator[Tx]:
        """One write transaction (BEGIN IMMEDIATE), committed on success.

        ``checked=False`` turns foreign keys off in it, for deleting rows no other row
        references any more (the caller made sure): checking a pack's row against the
        objects table, which has no index by pack, reads the whole table for each row.
        """
        if self.read_only:
            raise StoreNotWritableError(f"cannot write index {self.path}: the store is read-only")
        conn = self.conn()
        with self.guard():
            if not checked:  # outside the transaction: inside it, the pragma does nothing
                conn.execute("PRAGMA foreign_keys=OFF")
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield Tx(conn)
                except BaseException:
                    if conn.in_transaction:  # SQLite rolls back by itself when the disk is full
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            finally:
                if not checked:
                    conn.execute("PRAGMA foreign_keys=ON")

    def vacuum(self) -> None:
        """Give the pages that deletions freed back to the file system."""
        if not self.read_only:
            with self.guard():
                # Each step of the statement frees one page; a script runs it to the end.
                self.conn().executescript("PRAGMA incremental_vacuum;")

    def close(self) -> None:
        """Close every connection (later use raises StoreError)."""
        self._closed = True
        with self._lock:
            for conn in self._connections:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._connections.clear()


class Tx:
    """A connection inside a write transaction."""

    __slots__ = ("conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(
        self, sql: str, params: tuple[object, ...] | dict[str, object] = ()
    ) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: list[tuple[object, ...]]) -> None:
        """Run one statement for each row."""
        self.conn.executemany(sql, rows)

    def executescript_in_tx(self, script: str) -> None:
        """Run ``script``'s statements one by one (``executescript`` would commit)."""
        for statement in script.split(";"):
            if statement.strip():
                self.conn.execute(statement)
