"""The :class:`Store`: put fixtures and spans in, get runs, steps, bodies and spans out."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from otel_replay import settings
from otel_replay.capture._handoff import Fixture
from otel_replay.errors import (
    CorruptBlobError,
    RunNotFoundError,
    StoreError,
    StoreNotWritableError,
)
from otel_replay.store import _retention, _verify
from otel_replay.store._facts import facts_of, span_run_id
from otel_replay.store._flush import Pending, PendingSpan, checked, write
from otel_replay.store._format import INDEX_FILE, ensure_format, pin_path, stream_label
from otel_replay.store._fs import Backend, FsspecBackend, LocalBackend, is_url
from otel_replay.store._index import Index
from otel_replay.store._reader import Reader
from otel_replay.store._records import Record, decode_record
from otel_replay.store._retention import Retention
from otel_replay.store._rows import StepRef
from otel_replay.store._spans import prepare_span, restore
from otel_replay.store._stream import COMPACT_AFTER, StreamWriter, compact
from otel_replay.store._sync import stream_records, sync_index
from otel_replay.store._types import GcReport, Progress, RunInfo, StepInfo, VerifyProblem

__all__ = ["Store"]


def _cache_root(cache_dir: str | os.PathLike[str] | None) -> Path:
    chosen = cache_dir or settings.read("OTEL_REPLAY_CACHE_DIR")
    if chosen:
        return Path(chosen).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "otel-replay"


def _cache_of(location: str, cache_dir: str | os.PathLike[str] | None) -> Path:
    """The directory holding the cached index of the remote store at ``location``."""
    key = hashlib.sha256(location.encode()).hexdigest()[:16]
    return _cache_root(cache_dir) / key


def _prepared(span: Any) -> PendingSpan:
    """A span :meth:`Store.prepare` made (ValueError for anything else)."""
    if type(span) is not tuple or len(span) != 3 or type(span[1]) is not tuple:
        raise ValueError("a span is a dict, or what Store.prepare made of one")
    prepared: PendingSpan = span
    return prepared


def _tag(digest: bytes) -> str:
    return "sha256:" + digest.hex()


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


class Store:
    """A fixture store: a local directory or an fsspec URL, opened with :meth:`open`.

    Writing: :meth:`put` buffers fixtures and spans, :meth:`flush` makes them durable (one
    pack per run, one fsync per file and directory, one SQLite commit). Reading: :meth:`runs`,
    :meth:`steps`, :meth:`fixture`, :meth:`request_body` / :meth:`response_body` (bytes checked
    against their sha256) and :meth:`spans`. Upkeep: :meth:`pin`, :meth:`verify`, :meth:`gc`,
    :meth:`compact`. Close it (or use ``with``) to flush and compact what it wrote.

    Thread-safe: one thread may write while others read. Several processes (and, for a remote
    store, several machines) may record into one store at once: each writes its own streams.
    A remote store keeps its index in a local cache directory and rebuilds it from the packs'
    records (:meth:`refresh`, done by :meth:`open`).
    """

    def __init__(
        self, backend: Backend, index: Index, retention: Retention, remote: bool = False
    ) -> None:
        self._backend = backend
        self._index = index
        self._reader = Reader(backend)
        self._remote = remote
        self.retention = retention
        """The retention policy :meth:`gc` applies."""
        self._lock = threading.RLock()
        self._pending: list[Pending] = []
        self._spans: list[PendingSpan] = []
        self._writers: OrderedDict[str, StreamWriter] = OrderedDict()
        self._records: OrderedDict[tuple[str, int, int], Record] = OrderedDict()
        self._closed = False
        self.compact_after: int | None = COMPACT_AFTER
        """After this many flushes of a run, its per-flush packs are merged (None: only at
        close). A merge of up to 1 MiB runs at zstd level 19: about half a second at most."""

    @classmethod
    def open(
        cls,
        location: str | os.PathLike[str] | None = None,
        *,
        create: bool = True,
        storage_options: Mapping[str, Any] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        retention: Retention | None = None,
    ) -> Store:
        """Open (or create) the store at ``location``: a path or an fsspec URL.

        ``location`` defaults to ``OTEL_REPLAY_STORE``. ``storage_options`` go to fsspec
        (e.g. ``endpoint_url``, ``key``, ``secret`` for S3). A remote store's index lives in
        ``cache_dir`` (default ``OTEL_REPLAY_CACHE_DIR``, else ``~/.cache/otel-replay``).

        Raises StoreFormatError (unknown/newer format, or a non-empty directory that is not a
        store), StoreNotFoundError (nothing there and ``create`` is False),
        StoreNotWritableError, or CorruptIndexError (damaged ``index.sqlite``).
        """
        where = str(location if location is not None else settings.read("OTEL_REPLAY_STORE"))
        where = where.removeprefix("file://")
        policy = retention or Retention.from_env()
        if is_url(where):
            remote = FsspecBackend(where, storage_options)
            ensure_format(remote, create=create)
            cache = _cache_of(remote.location, cache_dir)
            try:
                cache.mkdir(parents=True, exist_ok=True)
                (cache / "LOCATION").write_text(remote.location + "\n")
            except OSError as exc:
                raise StoreNotWritableError(f"cannot write index cache {cache}: {exc}") from None
            store = cls(remote, Index(cache / INDEX_FILE), policy, remote=True)
            try:
                store.refresh()
            except BaseException:
                store._index.close()
                raise
            return store
        local = LocalBackend(Path(where).expanduser())
        ensure_format(local, create=create)
        if not os.access(local.root, os.W_OK):
            raise StoreNotWritableError(f"cannot write store {local.root}: permission denied")
        return cls(local, Index(local.root / INDEX_FILE), policy)

    @classmethod
    def rebuild(
        cls,
        location: str | os.PathLike[str],
        *,
        storage_options: Mapping[str, Any] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> Store:
        """Rebuild a store's index from its packs, and open the store.

        The old ``index.sqlite`` (for a remote store: the cached one in ``cache_dir``, see
        :meth:`open`) is kept as ``index.sqlite.broken-<unix time>``, never deleted. A pack
        that cannot be read is logged and left out, and :meth:`verify` names it.
        """
        where = str(location).removeprefix("file://")
        if is_url(where):
            remote = FsspecBackend(where, storage_options)
            ensure_format(remote, create=False)
            _set_aside(_cache_of(remote.location, cache_dir) / INDEX_FILE)
            return cls.open(
                where, create=False, storage_options=storage_options, cache_dir=cache_dir
            )
        root = Path(where).expanduser()
        ensure_format(LocalBackend(root), create=False)
        _set_aside(root / INDEX_FILE)
        store = cls.open(root, create=False)
        sync_index(store._index, store._backend, store._reader, drop_missing=False)
        return store

    @property
    def location(self) -> str:
        """Where the store is: a path or a URL."""
        return self._backend.location

    # -- writing ---------------------------------------------------------------------------

    def put(
        self,
        fixtures: Iterable[Fixture] = (),
        spans: Iterable[Mapping[str, Any] | PendingSpan] = (),
    ) -> None:
        """Buffer fixtures and spans for the next :meth:`flush`.

        Spans are JSON-ready dicts (name, ids, times, status, attributes, events, …), each
        with a ``replay.run.id`` attribute, or what :meth:`prepare` made of such dicts; they
        are stored as given and come back from :meth:`spans` equal (tuples as lists). A step's
        provider, model and tokens are read from its span (``replay.step.index``) when both
        come in the same flush. Raises ValueError when a body does not match its hash or a
        span has no run id or is not JSON-ready.
        """
        pending = [checked(fx) for fx in fixtures]
        copies = [
            self.prepare(span) if isinstance(span, Mapping) else _prepared(span) for span in spans
        ]
        with self._lock:
            self._check_open()
            self._pending.extend(pending)
            self._spans.extend(copies)

    @staticmethod
    def prepare(span: Mapping[str, Any]) -> PendingSpan:
        """``span`` as :meth:`put` keeps it until the flush, made now: its JSON and its long
        strings, checked, in plain tuples that hold nothing the caller can still change (and
        that the garbage collector stops tracking). For a caller that holds many spans before
        putting them. ValueError like :meth:`put`."""
        run_id = span_run_id(span)
        if run_id is None:
            raise ValueError(f"span {span.get('name')!r} has no replay.run.id attribute")
        try:
            prepared = prepare_span(span)
        except TypeError as exc:
            raise ValueError(f"span {span.get('name')!r} is not JSON-ready: {exc}") from None
        return run_id, prepared, facts_of(span)

    def flush(self) -> None:
        """Make everything put so far durable; on return it survives a crash or power loss.

        On failure (StoreError, StoreNotWritableError) the buffered items stay buffered and
        the next flush retries them.
        """
        with self._lock:
            self._check_open()
            if not self._pending and not self._spans:
                return
            pending, spans = self._pending, self._spans
            self._pending, self._spans = [], []
            try:
                write(
                    self._backend,
                    self._index,
                    self._reader,
                    self._writers,
                    pending,
                    spans,
                    compact_after=self.compact_after,
                )
            except BaseException:
                self._pending[:0] = pending
                self._spans[:0] = spans
                raise

    def compact(self) -> int:
        """Merge the small packs of every stream of the store; the number of packs merged."""
        merged = 0
        with self._lock:
            for run_id, stream, _ in self._index.streams():
                merged += compact(self._backend, self._reader, run_id, stream)[0]
        return merged

    # -- reading ---------------------------------------------------------------------------

    def runs(self) -> list[RunInfo]:
        """Every run in the store, oldest first."""
        return self._index.runs()

    def run(self, run_id: str) -> RunInfo:
        """One run; RunNotFoundError when there is none with that id."""
        info = self._index.run(run_id)
        if info is None:
            raise RunNotFoundError(f"no run {run_id!r} in the store at {self.location}")
        return info

    def steps(self, run_id: str) -> list[StepInfo]:
        """The steps of a run, in index order; RunNotFoundError for an unknown run."""
        self.run(run_id)
        return self._index.steps(run_id)

    def step(self, run_id: str, index: int) -> StepInfo:
        """One step; RunNotFoundError when the run or the step does not exist."""
        info = self._index.step(run_id, index)
        if info is not None:
            return info
        self.run(run_id)
        raise RunNotFoundError(f"run {run_id!r} has no step {index} (store {self.location})")

    def _ref(self, step: StepInfo | tuple[str, int]) -> StepRef:
        run_id, index = (step.run_id, step.index) if isinstance(step, StepInfo) else step
        ref = self._index.step_ref(run_id, index)
        if ref is not None:
            return ref
        self.run(run_id)
        raise RunNotFoundError(f"run {run_id!r} has no step {index} (store {self.location})")

    def request_body(self, step: StepInfo | tuple[str, int]) -> bytes:
        """The exact request body of a step, checked against its sha256.

        ``step`` is a StepInfo or ``(run_id, index)``. Raises CorruptBlobError naming the
        blob when the stored bytes are damaged, RunNotFoundError for an unknown step.
        """
        ref = self._ref(step)
        return self._reader.body(ref.run_id, ref.stream, ref.request_oid, ref.request_digest)

    def response_body(self, step: StepInfo | tuple[str, int]) -> bytes:
        """The exact response body of a step (``b""`` when none was received); see
        :meth:`request_body`."""
        ref = self._ref(step)
        if ref.response_oid is None or ref.response_digest is None:
            return b""
        return self._reader.body(ref.run_id, ref.stream, ref.response_oid, ref.response_digest)

    def _record(self, run_id: str, stream: int, oid: int) -> Record:
        key = (run_id, stream, oid)
        with self._lock:
            cached = self._records.get(key)
        if cached is not None:
            return cached
        try:
            record = decode_record(self._reader.raw(run_id, stream, oid)[1])
        except CorruptBlobError:
            raise
        except ValueError as exc:
            raise CorruptBlobError(
                f"record {oid} of run {run_id!r} ({self.location}/{stream_label(run_id, stream)})"
                f" cannot be read: {exc}"
            ) from None
        with self._lock:
            self._records[key] = record
            while len(self._records) > 16:
                self._records.popitem(last=False)
        return record

    def fixture(self, step: StepInfo | tuple[str, int]) -> Fixture:
        """The step as the capture handed it over: headers, timing, chunks and verified
        bodies. Raises like :meth:`request_body`."""
        ref = self._ref(step)
        record = self._record(ref.run_id, ref.stream, ref.record_oid)
        stored = next((s for s in record.steps if s.index == ref.index), None)
        if stored is None or (stored.request_oid, stored.response_oid) != (
            ref.request_oid,
            ref.response_oid,
        ):
            raise CorruptBlobError(
                f"record {ref.record_oid} of run {ref.run_id!r} "
                f"({self.location}/{stream_label(ref.run_id, ref.stream)}) does not hold step "
                f"{ref.index} as the index says"
            )
        request = self._reader.body(ref.run_id, ref.stream, ref.request_oid, ref.request_digest)
        response_hash = None if ref.response_digest is None else _tag(ref.response_digest)
        return stored.fixture(
            ref.run_id,
            request,
            self.response_body(step),
            _tag(ref.request_digest),
            response_hash,
        )

    def spans(self, run_id: str) -> list[dict[str, Any]]:
        """The spans put for a run, as they were given (each stream's in put order)."""
        self.run(run_id)
        out: list[list[dict[str, Any]]] = []
        for _, stream, committed in self._index.streams(run_id):
            spans: list[dict[str, Any]] = []

            def load(oid: int, stream: int = stream) -> bytes:
                return self._reader.object(run_id, stream, oid)

            try:
                for _, record in stream_records(self._reader, run_id, stream, stop=committed):
                    spans.extend(restore(record.spans, record.ext, record.tags, load))
            except CorruptBlobError:
                raise
            except (ValueError, LookupError, TypeError) as exc:
                where = f"{self.location}/{stream_label(run_id, stream)}"
                raise CorruptBlobError(f"spans of run {run_id!r} in {where}: {exc}") from None
            out.append(spans)
        out.sort(key=lambda group: min((s.get("start_ns") or 0 for s in group), default=0))
        return [span for group in out for span in group]

    # -- upkeep ----------------------------------------------------------------------------

    def pin(self, run_id: str, pinned: bool = True) -> None:
        """Keep a run forever (``pinned=False`` puts it back under the retention policy)."""
        self.run(run_id)
        with self._lock:
            if pinned:
                self._backend.publish(pin_path(run_id), b"", replace=True)
            else:
                self._backend.delete(pin_path(run_id))
            self._backend.sync()
            self._index.set_pinned(run_id, pinned)

    def verify(self, progress: Progress | None = None) -> list[VerifyProblem]:
        """Re-read every pack, re-hash every body, check the index against the packs.

        Returns the problems found (empty: the store is intact); each names the damaged
        thing. ``progress(done, total)`` is called as streams and steps are checked.
        """
        return _verify.verify(self._index, self._backend, self._reader, progress)

    def gc(
        self, *, now: float | None = None, dry_run: bool = False, progress: Progress | None = None
    ) -> GcReport:
        """Remove expired runs, then what no run references, then compact leftovers.

        ``now`` is Unix seconds (default: the current time). With ``dry_run`` nothing is
        changed and the report says what would be removed. See ``_retention`` for the rules.
        """
        with self._lock:
            self._check_open()
            if self._remote:
                self.refresh()
            report = _retention.collect(
                index=self._index,
                backend=self._backend,
                reader=self._reader,
                retention=self.retention,
                now=time.time() if now is None else now,
                dry_run=dry_run,
                progress=progress,
            )
            if not dry_run:
                for run_id in report.runs_removed:
                    self._writers.pop(run_id, None)
            return report

    def refresh(self) -> int:
        """Update the index from the packs (remote stores: what other machines wrote or
        removed); the number of streams read."""
        return sync_index(self._index, self._backend, self._reader, drop_missing=self._remote)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the store at {self.location} is closed")

    def close(self) -> None:
        """Flush, compact the streams this store wrote, and close the index."""
        with self._lock:
            if self._closed:
                return
            try:
                self.flush()
                for writer in self._writers.values():
                    if writer.fresh:
                        compact(self._backend, self._reader, writer.run_id, writer.stream)
            finally:
                self._closed = True
                self._index.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
