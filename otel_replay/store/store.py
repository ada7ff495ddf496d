"""The :class:`Store`: put steps and spans in, get runs, steps, bodies and spans out."""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from otel_replay import settings
from otel_replay._printable import clipped
from otel_replay.errors import (
    CorruptBlobError,
    CorruptIndexError,
    RunNotFoundError,
    StoreError,
    StoreFullError,
    StoreNotFoundError,
    StoreNotWritableError,
)
from otel_replay.step import RunEnd, RunFacts, Step

# _write, _gc, _repack, _verify, _sync and _imports load when used: a verb that only reads
# (show, runs) does not pay for them; nor does runs, which reads the index alone, for
# _records and _derived (the records' decoder, and the codecs that rebuild a span).
from otel_replay.store import _labels, _rows
from otel_replay.store._format import (
    INDEX_FILE,
    LOCK_FILE,
    ensure_format,
    is_recording_id,
    parse_record_name,
    pin_path,
)
from otel_replay.store._fs import (
    NO_SPACE,
    Backend,
    FsspecBackend,
    LocalBackend,
    anchored,
    is_url,
)
from otel_replay.store._index import Index, OutdatedIndexError
from otel_replay.store._lock import StoreLock
from otel_replay.store._read import ObjectReader
from otel_replay.store._types import FailureLabel, Progress, Retention, RunInfo, StepInfo

if TYPE_CHECKING:
    import logging

    from otel_replay.store._records import Record, SpanEntry
    from otel_replay.store._repack import Context
    from otel_replay.store._reports import Buffered, GcReport, ImportedFile, VerifyProblem
    from otel_replay.store._write import Pending, Session

__all__ = ["Store"]


def _log() -> logging.Logger:
    """The store's logger: logging loads when there is something to say, not with the store."""
    import logging  # noqa: PLC0415

    return logging.getLogger("otel_replay.store")


def _cache_root(cache_dir: str | os.PathLike[str] | None) -> Path:
    chosen = cache_dir or settings.read("OTEL_REPLAY_CACHE_DIR")
    if chosen:
        return Path(os.path.expanduser(chosen))
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(os.path.expanduser(base)) / "otel-replay"


def _cache_of(location: str, cache_dir: str | os.PathLike[str] | None) -> Path:
    """The directory holding the cached index of the remote store at ``location``."""
    key = hashlib.sha256(location.encode()).hexdigest()[:16]
    return _cache_root(cache_dir) / key


def _set_aside(index: Path) -> None:
    """Rename an index file (and its WAL files) to ``<name>.broken-<unix time>``."""
    stamp = int(time.time())
    for suffix in ("", "-wal", "-shm"):
        old = index.with_name(index.name + suffix)
        try:
            if old.exists():
                old.rename(index.with_name(f"{index.name}.broken-{stamp}{suffix}"))
        except OSError as exc:
            raise StoreNotWritableError(f"cannot set {old} aside: {exc.strerror}") from None


def _ensure_remote_format(remote: FsspecBackend, create: bool) -> None:
    """:func:`ensure_format` on a remote store, what refuses the first request named as the
    store's error (StoreError)."""
    try:
        ensure_format(remote, create=create)
    except StoreNotFoundError:
        raise  # it names the store itself, and the CLI says which setting to check
    except OSError as exc:  # unreachable, refused, not a directory: name the store
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise StoreError(f"cannot open store {remote.location}: {reason}") from None
    except Exception as exc:
        # The client library's own refusal (botocore's NoCredentialsError is no OSError):
        # the store cannot be opened, which is no bug of ours.
        if type(exc).__module__.partition(".")[0] in ("otel_replay", "builtins"):
            raise
        reason = f"{type(exc).__name__}: {exc}"
        raise StoreError(f"cannot open store {remote.location}: {reason}") from None


def _open_index(path: Path, holder: str, *, cache: bool = False) -> Index:
    """The index at ``path`` (of ``holder``, for messages); one made by an earlier
    otel-replay is set aside and started afresh (``rebuilt`` is then True: the caller reads
    the files into it). So is, for a remote store's ``cache``, one that cannot be read or
    that a later otel-replay made: the bucket holds everything it knew."""
    try:
        return Index(path, holder=holder)
    except CorruptIndexError as exc:
        if not (cache or isinstance(exc, OutdatedIndexError)):
            raise
        _set_aside(path)
    index = Index(path, holder=holder)
    index.rebuilt = True
    return index


def _entries(records: list[Record]) -> dict[int, tuple[str, Mapping[str, Any]]]:
    """The step entries of a record file by step index (the first of an index wins), each
    with its record's run id."""
    found: dict[int, tuple[str, Mapping[str, Any]]] = {}
    for record in records:
        for entry in record.steps:
            found.setdefault(entry["index"], (record.run_id, entry))
    return found


def _writable(root: Path) -> bool:
    return os.access(root, os.W_OK)


class Store:
    """A store of recorded runs: a local directory or an fsspec URL, opened with :meth:`open`.

    Writing: :meth:`put` buffers steps and spans, :meth:`end_run` marks a run closed,
    :meth:`flush` makes them durable. Reading: :meth:`runs`, :meth:`steps`, :meth:`read_step`
    (:meth:`read_steps` for a whole run), :meth:`request_body` / :meth:`response_body` (bytes
    checked against their sha256) and :meth:`spans`. Derived: :meth:`label` and
    :meth:`labels`, the failure labels of ``triage``. Upkeep: :meth:`pin`, :meth:`verify`,
    :meth:`gc`, :meth:`compact`. Close it (or use ``with``) to flush, end the runs it recorded,
    and merge what it wrote.

    Thread-safe. Several processes (and, for a remote store, several machines) may record
    into one store at once; each open store is a recording of its own (``_write``). A store
    that cannot be written (a read-only mount) opens read-only: reading works, writing
    raises StoreNotWritableError.
    """

    def __init__(
        self,
        backend: Backend,
        index: Index,
        retention: Retention,
        *,
        remote: bool = False,
        read_only: bool = False,
        recording: str | None = None,
        inherited_runs: Iterable[str] = (),
    ) -> None:
        self._backend = backend
        self._index = index
        self._remote = remote
        self.read_only = read_only
        """True when the store cannot be written (writing raises StoreNotWritableError)."""
        root = backend.root if isinstance(backend, LocalBackend) else Path(backend.location)
        lock_path = None if remote or read_only else root / LOCK_FILE
        self._lock_file = StoreLock(lock_path)
        self._reader = ObjectReader(backend, self._locate, self._relocate)
        self.retention = retention
        """The retention policy :meth:`gc` applies."""
        self._lock = threading.RLock()
        # The writing side is made on first use (``_pending``, ``_session``): a store opened
        # to be read never loads it.
        self._recording = recording
        self._inherited = tuple(inherited_runs)
        self._pending_steps: Pending | None = None
        self._writing: Session | None = None
        self._closed = False

    @property
    def _pending(self) -> Pending:
        """What was put and is not written yet."""
        with self._lock:
            if self._pending_steps is None:
                from otel_replay.store._write import Pending  # noqa: PLC0415 - see __init__

                self._pending_steps = Pending()
            return self._pending_steps

    @_pending.setter
    def _pending(self, pending: Pending) -> None:
        self._pending_steps = pending

    @property
    def _session(self) -> Session:
        """The writing side: the recording this store writes, and what it wrote."""
        writing = self._writing
        if writing is not None:  # once made, read without waiting for a flush's lock
            return writing
        with self._lock:
            if self._writing is None:
                from otel_replay.store._write import Session  # noqa: PLC0415 - see __init__

                self._writing = Session(
                    self._backend, self._index, self._lock_file, self._recording, self._inherited
                )
            return self._writing

    @staticmethod
    def is_read_only(location: str | os.PathLike[str]) -> bool:
        """True when ``location`` is a local store that cannot be written (a read-only mount,
        a directory this user may not write): :meth:`open` gives it read-only."""
        where = str(location).removeprefix("file://")
        if is_url(where):
            return False
        root = Path(os.path.expanduser(where))
        return root.is_dir() and not _writable(root)

    @staticmethod
    def anchor(location: str | os.PathLike[str]) -> str:
        """``location`` as it means from the current directory, for opening it later: a URL as
        it is, a local path made absolute (an application may change its directory first)."""
        return anchored(str(location))

    @classmethod
    def open(
        cls,
        location: str | os.PathLike[str] | None = None,
        *,
        create: bool = True,
        storage_options: Mapping[str, Any] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        retention: Retention | None = None,
        recording: str | None = None,
        inherited_runs: Iterable[str] = (),
    ) -> Store:
        """Open (or create) the store at ``location``: a path or an fsspec URL.

        ``location`` defaults to ``OTEL_REPLAY_STORE``. ``storage_options`` go to fsspec
        (e.g. ``endpoint_url``, ``key``, ``secret`` for S3). A remote store's index lives in
        ``cache_dir`` (default ``OTEL_REPLAY_CACHE_DIR``, else ``~/.cache/otel-replay``). A
        local store that cannot be written opens read-only (its index opened immutable, or,
        when it has none, built in memory from the files).

        ``recording`` is the recording this store writes (:attr:`recording`; default: a new
        one). Several open stores may write one recording, each into files of its own: a
        worker process writes its steps into the recording of the process that started it, so
        that a run made by both is one run. ``inherited_runs`` are runs such a store writes
        steps of but did not begin: :meth:`close` leaves their end to the store that began
        them. ValueError when ``recording`` is not an id :attr:`recording` could hold.

        Raises StoreFormatError (unknown/other format, or a non-empty directory that is not a
        store), StoreNotFoundError (nothing there and ``create`` is False),
        StoreNotWritableError, or CorruptIndexError (damaged ``index.sqlite``).
        """
        where = str(location if location is not None else settings.read("OTEL_REPLAY_STORE"))
        where = where.removeprefix("file://")
        policy = retention or Retention.from_env()
        if recording is not None and not is_recording_id(recording):
            raise ValueError(f"not a recording id: {recording!r} (16 hex digits)")
        inherited = tuple(inherited_runs)
        if is_url(where):
            remote = FsspecBackend(where, storage_options)
            _ensure_remote_format(remote, create)
            cache = _cache_of(remote.location, cache_dir)
            try:
                cache.mkdir(parents=True, exist_ok=True)
                (cache / "LOCATION").write_text(remote.location + "\n")
            except OSError as exc:
                if exc.errno in NO_SPACE:
                    raise StoreFullError(
                        f"no space left on the device holding the index cache {cache} of the "
                        f"store at {remote.location}"
                    ) from None
                # A read-only home (a container's) is where this bites: name the way out.
                raise StoreNotWritableError(
                    f"cannot write the index cache {cache} of the store at {remote.location} "
                    f"({exc.strerror or exc}): set OTEL_REPLAY_CACHE_DIR to a writable directory"
                ) from None
            store = cls(
                remote,
                _open_index(
                    cache / INDEX_FILE,
                    f"the index cache {cache} of the store at {remote.location}",
                    cache=True,
                ),
                policy,
                remote=True,
                recording=recording,
                inherited_runs=inherited,
            )
            try:
                store.refresh()
            except BaseException:
                store._index.close()
                raise
            return store
        local = LocalBackend(Path(os.path.expanduser(where)))
        if local.root.is_dir() and not _writable(local.root):
            ensure_format(local, create=False)
            index_file = local.root / INDEX_FILE
            if index_file.exists():
                with contextlib.suppress(OutdatedIndexError):  # then built in memory
                    index = Index(index_file, read_only=True)
                    if not index.rebuilt:
                        return cls(local, index, policy, read_only=True)
                    index.close()  # an empty file: built in memory too
            store = cls(local, Index(":memory:"), policy, read_only=True)
            from otel_replay.store._sync import sync  # noqa: PLC0415

            sync(store._index, local)
            return store
        ensure_format(local, create=create)
        lost_index = not (local.root / INDEX_FILE).exists()
        index = _open_index(local.root / INDEX_FILE, f"the store at {local.location}")
        lost_index = lost_index or index.rebuilt
        store = cls(local, index, policy, recording=recording, inherited_runs=inherited)
        if lost_index:  # a store whose index was deleted: its files say everything
            store.refresh()
        return store

    @classmethod
    def _previous_format(cls, root: Path) -> Store:
        """The local store at ``root``, of the format version before this one, opened to be
        migrated (``_migrate``): read, and its record files rewritten."""
        local = LocalBackend(root)
        ensure_format(local, create=False, previous=True)
        lost_index = not (root / INDEX_FILE).exists()
        index = _open_index(root / INDEX_FILE, f"the store at {local.location}")
        store = cls(local, index, Retention.from_env())
        if lost_index or index.rebuilt:
            store.refresh()
        return store

    @classmethod
    def rebuild(
        cls,
        location: str | os.PathLike[str],
        *,
        storage_options: Mapping[str, Any] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> Store:
        """Rebuild a store's index from its files, and open the store.

        The old ``index.sqlite`` (for a remote store: the cached one) is kept as
        ``index.sqlite.broken-<unix time>``, never deleted. What cannot be read is left out
        (:meth:`verify` names it); every readable step is kept.
        """
        where = str(location).removeprefix("file://")
        if is_url(where):
            remote = FsspecBackend(where, storage_options)
            ensure_format(remote, create=False)
            _set_aside(_cache_of(remote.location, cache_dir) / INDEX_FILE)
            return cls.open(
                where, create=False, storage_options=storage_options, cache_dir=cache_dir
            )
        root = Path(os.path.expanduser(where))
        ensure_format(LocalBackend(root), create=False)
        _set_aside(root / INDEX_FILE)
        store = cls.open(root, create=False)
        store.refresh()
        return store

    @property
    def location(self) -> str:
        """Where the store is: a path or a URL."""
        return self._backend.location

    @property
    def recording(self) -> str:
        """The recording this store writes (see :meth:`open`)."""
        return self._session.recording

    # -- writing ---------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self._closed:
            raise StoreError(f"the store at {self.location} is closed")
        if self.read_only:
            raise StoreNotWritableError(f"cannot write store {self.location}: it is read-only")

    def put(
        self,
        steps: Iterable[Step] = (),
        spans: Iterable[Mapping[str, Any]] = (),
        runs: Iterable[RunFacts] = (),
    ) -> None:
        """Buffer steps, spans and runs' facts for the next :meth:`flush`.

        A run's facts usually come with its steps (``Step.run``); ``runs`` states them for
        a run that has none (spans only, say).
        Spans are JSON-ready dicts (name, ids, times, status, attributes, events, …), each
        with a ``replay.run.id`` attribute naming the run they are filed under; they come
        back from :meth:`spans` equal. What a span repeats of a step put in the same call
        (its inline bodies, the codec's content attributes) is not stored again but rebuilt
        on read (``_derived``): put a span with its steps. Raises ValueError when a body
        does not match its hash or a span has no run id.
        """
        from otel_replay.store import _write  # noqa: PLC0415 - see the imports

        accepted, encoded = _write.prepare(steps, spans)
        with self._lock:
            self._check_writable()
            pending = self._pending
            for step in accepted:
                pending.add_step(step)
            for span in encoded:
                pending.add_span(span)
            for facts in runs:
                pending.facts[facts.run_id] = facts

    def end_run(self, end: RunEnd) -> None:
        """Record that a run's recorder closed it (written with the next flush)."""
        with self._lock:
            self._check_writable()
            self._pending.ends[end.run_id] = end

    def keep_open(self, run_id: str) -> None:
        """Leave run ``run_id`` unended (``incomplete``) when this store closes, which ends
        the runs it wrote: an import's run whose last spans have not arrived yet, which a
        later import ends (:meth:`end_run`)."""
        with self._lock:
            self._session.inherited.add(run_id)

    def flush(self) -> None:
        """Make everything put so far durable; on return it survives a crash or power loss.

        On failure (StoreError, StoreNotWritableError) the buffered items stay buffered and
        the next flush retries them. When the device is full (StoreFullError) it writes as
        much as fits first, in parts (each run's earliest steps first): :meth:`buffered`
        tells what is left.
        """
        with self._lock:
            self._check_writable()
            if not self._pending:
                return
            from otel_replay.store._write import Pending  # noqa: PLC0415 - see __init__

            todo = [self._pending]  # a stack: the part to write next is last
            self._pending = Pending()
            try:
                while todo:
                    try:
                        self._session.write(todo[-1])
                    except StoreFullError:
                        halves = todo[-1].split()
                        if halves is None:
                            raise
                        todo[-1:] = reversed(halves)
                    else:
                        todo.pop()
            except BaseException:
                left = Pending()
                for part in reversed(todo):
                    left.merge_back(part)
                left.merge_back(self._pending)
                self._pending = left
                raise

    def buffered(self) -> Buffered:
        """What was put and is not durable yet (what a failed :meth:`flush` left)."""
        from otel_replay.store._reports import Buffered  # noqa: PLC0415 - see the imports

        with self._lock:
            pending = self._pending
            return Buffered(
                {run_id: len(steps) for run_id, steps in pending.steps.items() if steps},
                sum(len(spans) for spans in pending.spans.values()),
            )

    def compact(self, progress: Progress | None = None) -> int:
        """Merge the store's small packs and record files, recompressed at a high level;
        the number of files merged."""
        with self._lock:
            self._check_writable()
            from otel_replay.store import _repack  # noqa: PLC0415

            return _repack.compact(self._gc_context(), progress=progress)

    # -- reading ---------------------------------------------------------------------------

    def _locate(self, digest: bytes) -> _rows.Located | None:
        with self._index.guard():
            return _rows.locate(self._index.conn(), digest)

    def _relocate(self) -> None:
        if self._remote:
            self.refresh()
        self._reader.forget()

    def runs(self, limit: int | None = None) -> list[RunInfo]:
        """Every run in the store, oldest first; with ``limit``, the ``limit`` that started
        last (in a time that does not grow with the store: what ``otel-replay runs`` shows
        by default)."""
        with self._index.guard():
            conn = self._index.conn()
            if limit is None:
                return _rows.run_infos(conn)
            return _rows.run_infos(conn, ids=_rows.newest_runs(conn, limit))

    def run_count(self) -> int:
        """How many runs :meth:`runs` lists."""
        with self._index.guard():
            return _rows.run_count(self._index.conn())

    def run_ids(self, prefix: str = "") -> list[str]:
        """The id of every run :meth:`runs` lists that starts with ``prefix``, without
        reading their steps, in a time that grows with how many match, not with the store."""
        with self._index.guard():
            return _rows.run_names(self._index.conn(), prefix)

    def _row(self, run_id: str) -> _rows.RunRow:
        with self._index.guard():
            row = _rows.run_row(self._index.conn(), run_id)
        if row is None:
            raise RunNotFoundError(f"no run {clipped(run_id)!r} in the store at {self.location}")
        return row

    def run(self, run_id: str) -> RunInfo:
        """One run, by its name in the store; RunNotFoundError when there is none."""
        with self._index.guard():
            found = _rows.run_infos(self._index.conn(), run_id)
        if not found:
            raise RunNotFoundError(f"no run {clipped(run_id)!r} in the store at {self.location}")
        return found[0]

    def steps(self, run_id: str) -> list[StepInfo]:
        """The steps of a run, in index order; RunNotFoundError for an unknown run."""
        row = self._row(run_id)
        with self._index.guard():
            return _rows.step_infos(self._index.conn(), row)

    def _ref(self, step: StepInfo | str, index: int | None) -> _rows.StepRef:
        if isinstance(step, StepInfo) and index is None:
            run_id, index = step.run_id, step.index
        elif isinstance(step, str) and index is not None:
            run_id = step
        else:
            raise TypeError(f"a step is a StepInfo, or a run id and an index, not {step!r}")
        row = self._row(run_id)
        with self._index.guard():
            ref = _rows.step_ref(self._index.conn(), row, index)
        if ref is None:
            raise RunNotFoundError(f"run {run_id!r} has no step {index} (store {self.location})")
        return ref

    def step(self, run_id: str, index: int) -> StepInfo:
        """One step; RunNotFoundError when the run or the step does not exist."""
        return self._ref(run_id, index).info

    def body(self, digest: str) -> bytes:
        """The exact bytes stored under ``sha256:<hex>``, checked; CorruptBlobError when
        damaged or absent."""
        return self._reader.content(bytes.fromhex(digest.removeprefix("sha256:")))

    def request_body(self, step: StepInfo | str, index: int | None = None) -> bytes:
        """The exact request body of a step, checked against its sha256.

        The step is a StepInfo, or a run id and an index. Raises CorruptBlobError naming the
        blob when the stored bytes are damaged, RunNotFoundError for an unknown step.
        """
        return self.body(self._ref(step, index).info.request_hash)

    def response_body(self, step: StepInfo | str, index: int | None = None) -> bytes:
        """The exact response body of a step (``b""`` when none was received); see
        :meth:`request_body`."""
        info = self._ref(step, index).info
        return b"" if info.response_hash is None else self.body(info.response_hash)

    def _records(self, rel: str) -> list[Record]:
        from otel_replay.store._records import decode_records  # noqa: PLC0415 - see the imports

        try:
            decoded = decode_records(self._backend.read(rel))
        except FileNotFoundError:
            raise CorruptBlobError(f"record file {self.location}/{rel} is missing") from None
        if decoded.problems and not decoded.records:
            raise CorruptBlobError(f"record file {self.location}/{rel}: {decoded.problems[0]}")
        return decoded.records

    def read_step(self, step: StepInfo | str, index: int | None = None) -> Step:
        """The step as the capture handed it over: headers, timing, chunks, verified bodies
        and its run's facts. Takes and raises like :meth:`request_body`."""
        ref = self._ref(step, index)
        with self._index.guard():
            facts = _rows.run_facts(self._index.conn(), self._row(ref.info.run_id).id)
        return self._step(ref, _entries(self._records(ref.record)), facts)

    def read_steps(self, run_id: str) -> list[Step]:
        """Every step of a run in index order, each as :meth:`read_step` gives it, reading
        each of the run's record files once. RunNotFoundError for an unknown run; raises
        CorruptBlobError like :meth:`read_step`."""
        row = self._row(run_id)
        with self._index.guard():
            refs = _rows.step_refs(self._index.conn(), row)
            facts = _rows.run_facts(self._index.conn(), row.id)
        entries: dict[str, dict[int, tuple[str, Mapping[str, Any]]]] = {}
        steps: list[Step] = []
        for ref in refs:
            if ref.record not in entries:
                entries[ref.record] = _entries(self._records(ref.record))
            steps.append(self._step(ref, entries[ref.record], facts))
        return steps

    def _step(
        self,
        ref: _rows.StepRef,
        entries: dict[int, tuple[str, Mapping[str, Any]]],
        facts: RunFacts | None,
    ) -> Step:
        """The step ``ref`` names, from the ``entries`` of its record file, bodies verified."""
        info = ref.info
        if info.index not in entries:
            raise CorruptBlobError(
                f"record file {self.location}/{ref.record} does not hold step {info.index} of "
                f"run {info.run_id!r} as the index says"
            )
        run_id, entry = entries[info.index]
        request = self.body(info.request_hash)
        response = b"" if info.response_hash is None else self.body(info.response_hash)
        from otel_replay.store._records import step_from_entry  # noqa: PLC0415 - see the imports

        return step_from_entry(run_id, entry, request, response, facts)

    def spans(self, run_id: str) -> list[dict[str, Any]]:
        """The spans put for a run, as they were given, in the order they were put."""
        row = self._row(run_id)
        with self._index.guard():
            paths = _rows.run_records(self._index.conn(), row.id)
        # A record is read once, however many of its writer's files hold it (a merge cut
        # off leaves the merged file beside the ones it merged until the next gc).
        by_seq: dict[tuple[str, int], Record] = {}
        rel_of: dict[int, str] = {}
        for rel in paths:
            name = parse_record_name(rel.rsplit("/", 1)[1])
            writer = rel if name is None else name.writer
            for record in self._records(rel):
                if by_seq.setdefault((writer, record.seq), record) is record:
                    rel_of[id(record)] = rel
        records = sorted(by_seq.values(), key=lambda r: r.seq)
        spans: list[dict[str, Any]] = []
        for record in records:
            for entry in record.spans:
                spans.append(self._span(entry, rel_of[id(record)]))
        return spans

    def _span(self, entry: SpanEntry, rel: str) -> dict[str, Any]:
        """A span as it was put, from its record entry (record file ``rel``)."""
        span = entry.span
        if not (entry.strings or entry.derived):
            return span
        attrs = dict(span.get("attributes") or {})
        for key, digest in entry.strings.items():
            attrs[key] = self.body(digest).decode("utf-8", "surrogatepass")
        if entry.derived is not None:
            from otel_replay.store._derived import rebuild  # noqa: PLC0415 - see the imports

            try:
                attrs.update(rebuild(attrs, entry.derived, self.body))
            except ValueError as exc:
                raise CorruptBlobError(
                    f"span {span.get('span_id')} of record file {self.location}/{rel}: {exc}"
                ) from None
        return {**span, "attributes": attrs}

    def recording_of(self, run_id: str) -> str:
        """The recording that wrote run ``run_id`` (see :meth:`open`): a store opened with it
        adds to that run rather than recording the id again. RunNotFoundError when unknown."""
        row = self._row(run_id)
        with self._index.guard():
            return _rows.recording_of(self._index.conn(), row)

    # -- imported files --------------------------------------------------------------------

    def imported_files(self) -> list[ImportedFile]:
        """The trace files imported so far (:meth:`note_imported`), oldest first. The list
        is kept as files in the store (``imports/``), so a rebuilt index knows it again."""
        with self._index.guard():
            return _rows.imported_files(self._index.conn())

    def note_imported(self, files: Iterable[ImportedFile]) -> None:
        """Remember ``files`` as imported; call it once their runs are flushed."""
        with self._lock:
            self._check_writable()
            from otel_replay.store import _imports  # noqa: PLC0415

            _imports.note(self._backend, self._index, list(files), time.time_ns())

    # -- failure labels --------------------------------------------------------------------

    def label(self, labels: Mapping[str, Sequence[FailureLabel]]) -> int:
        """Make ``labels[run_id]`` the failure labels of each run named (none: remove its
        labels); the number of runs whose labels changed.

        Labels are derived data (``otel-replay triage`` finds them in the recording): they
        are kept in a file per run under ``labels/``, so an index rebuilt from the files has
        them again, and the runs' recordings are not touched. RunNotFoundError for an
        unknown run (nothing is written then)."""
        rows = [(self._row(run_id), found) for run_id, found in labels.items()]
        with self._lock:
            self._check_writable()
            return _labels.write(self._backend, self._index, rows)

    def labels(self, run_id: str | None = None) -> dict[str, list[FailureLabel]]:
        """The failure labels of every labelled run (or of run ``run_id`` alone), by run
        name: each run's own label (``step`` None) first, then its steps' in order."""
        with self._index.guard():
            return _labels.labels(self._index.conn(), run_id)

    # -- upkeep ----------------------------------------------------------------------------

    def pin(self, run_id: str, pinned: bool = True) -> None:
        """Keep a run forever (``pinned=False`` puts it back under the retention policy)."""
        row = self._row(run_id)
        with self._lock:
            self._check_writable()
            if pinned:
                data = row.name.encode("utf-8", "surrogatepass")
                self._backend.publish(pin_path(row.name), data, replace=True)
            else:
                self._backend.delete(pin_path(row.name))
            self._backend.sync()
            with self._index.transaction() as tx:
                tx.execute("UPDATE runs SET pinned = ? WHERE id = ?", (pinned, row.id))

    def discard(self, run_id: str) -> None:
        """Remove run ``run_id`` (its record files, then its index row), as gc removes an
        expired run: what only it referenced goes at the next gc. For the recorder's
        sampling (``OTEL_REPLAY_SAMPLE_OK``); a run that is not there is left alone."""
        with self._lock:
            self._check_writable()
            from otel_replay.store import _gc  # noqa: PLC0415

            _gc.remove_runs(self._gc_context(), [run_id])

    def verify(self, progress: Progress | None = None) -> list[VerifyProblem]:
        """Re-read every pack and record, re-hash every object, check the index against the
        files. Returns what was found (empty: intact); each problem names its thing, and
        :attr:`VerifyProblem.damage` tells damage from a notice."""
        from otel_replay.store import _verify  # noqa: PLC0415

        return _verify.verify(self._index, self._backend, self._reader, progress)

    def _gc_context(self) -> Context:
        from otel_replay.store._repack import Context  # noqa: PLC0415

        return Context(
            backend=self._backend,
            index=self._index,
            reader=self._reader,
            lock=self._lock_file,
            remote=self._remote,
        )

    def gc(
        self, *, now: float | None = None, dry_run: bool = False, progress: Progress | None = None
    ) -> GcReport:
        """Remove expired runs, then every object no live run references, and repack what
        is left in small or mostly dead packs. See ``_gc`` for the rules. ``now`` is Unix
        seconds (default: the current time); with ``dry_run`` nothing is changed."""
        with self._lock:
            if not dry_run:
                self._check_writable()
            from otel_replay.store import _gc  # noqa: PLC0415

            report = _gc.collect(
                self._gc_context(),
                self.retention,
                now=time.time() if now is None else now,
                dry_run=dry_run,
                progress=progress,
            )
            if self._writing is not None:  # what it knew stored may be gone
                self._writing.forget_known()
            return report

    def refresh(self) -> int:
        """Update the index from the files (remote stores: what other machines wrote or
        removed); the number of packs and record files read."""
        from otel_replay.store._sync import sync  # noqa: PLC0415

        report = sync(self._index, self._backend)
        if report.dropped and self._writing is not None:
            self._writing.forget_known()
        for problem in report.problems:
            _log().warning("otel-replay: %s", problem.message)
        return report.packs + report.records

    def close(self, timeout: float | None = None) -> None:
        """Flush, end the runs this store recorded, merge the packs and record files it
        wrote, and close the index. With ``timeout`` (seconds), no merging is begun once it
        has passed, and each step's work is sized to the time left; what is left, gc or
        :meth:`compact` merges (merging is never needed for correctness)."""
        with self._lock:
            if self._closed:
                return
            try:
                # A store nothing was put into (nor its recording asked for) has no
                # writing side: nothing to end, flush or merge.
                writing = self._writing is not None or self._pending_steps is not None
                if writing and not self.read_only:
                    for end in self._session.unended(self._pending):
                        self._pending.ends[end.run_id] = end
                    self.flush()
                    deadline = None if timeout is None else time.monotonic() + timeout
                    if self._session.packs or self._session.runs:  # a reader's wrote nothing
                        self._merge(deadline)
            finally:
                self._closed = True
                self._index.close()

    def _merge(self, deadline: float | None) -> None:
        """Merge what this store's session wrote, until ``deadline`` (``close``)."""
        from otel_replay.store import _repack  # noqa: PLC0415

        try:
            _repack.merge_session(self._gc_context(), self._session, deadline)
        except StoreFullError as exc:  # the files stay as they are, all valid
            _log().info("otel-replay: what this store wrote stays unmerged: %s", exc)

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
