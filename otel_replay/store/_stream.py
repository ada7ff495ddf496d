"""Writing objects: one stream per run per writer, deduplicated, packed per flush.

Dedup and compression, the design:

* A body is stored once per stream, keyed by the sha256 of its exact bytes. A JSON body is
  split (``_segments``) at the elements of its message and tool arrays; each element is stored
  once, and the body becomes a *recipe*: skeleton bytes plus references to elements. Request
  *n* of a conversation therefore costs its new messages plus a few bytes of recipe.
* Elements are recognised by their bytes, not hashed: the writer keeps the segments of the
  last requests in memory (:data:`RECENT_BYTES`, or twice the largest body), and the
  splitter's *probe* finds a known segment at an element's start by its first bytes and one
  comparison, then jumps over it. The next request re-sends the previous one's messages, so
  they are all found; a message that comes back after more than that is stored again (and
  zstd, in the same pack or after compaction, makes the copy cheap).
* A span string that repeats a body of the same flush (the inline request and response
  bodies) is matched to it by comparison, without hashing (:meth:`StreamWriter.put_string`).
* References are object numbers within the stream, not 32-byte hashes: a 60-message request
  would otherwise carry 2 KB of incompressible hashes. Consecutive references cost a byte.
* A flush writes one pack per stream with everything new, its objects sharing zstd frames
  (level :data:`FLUSH_LEVEL`): fast, and small objects compress together. When one flush
  carries many steps of a run (a burst), their bodies are stored whole: zstd finds their
  repeats within the pack for less than splitting costs (``_flush.WHOLE_STEPS``). The packs
  of a flush are compressed on another CPU while the flush encodes the next runs
  (:class:`Packer`).
* Per-flush packs of a step or two compress poorly on their own, so a stream's small packs
  are *compacted* into one pack at a high level (:func:`compact_level`): the packs of the
  last :data:`COMPACT_AFTER` flushes after that many flushes (each byte is recompressed about
  twice, never once per flush), and all of the stream's small packs when the store is closed
  (or by ``gc`` for a writer that was killed). Compaction publishes the merged pack before
  deleting the small ones; readers prefer the widest pack, so a compaction cut short leaves
  a valid stream.

Dedup is per stream, hence per run: a run's history, tools and system prompt are stored once
in that run. Across runs nothing is shared, which keeps every run self-contained: ``gc``
deletes a run's directory and can never delete something another run needs, and writers on
several machines need no shared counter or lock. Sharing would save a run its system prompt
and tools (~1.5 KB compressed in ``bench/store_ratio.py``) but needs a store-wide digest map,
which costs about as much per run in index bytes, plus reference tracking in ``gc``.

Measured (``bench/store_ratio.py``, 30 turns): 702 KB of request and response bodies become
82 KB of unique objects; compacted with the run's records, one pack of 19.3 KB, of which the
records take 3.9 KB (their headers and ids are mostly random bytes).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from otel_replay.store._format import pack_path, run_dir, stream_label
from otel_replay.store._fs import Backend, submit
from otel_replay.store._pack import (
    KIND_RAW,
    KIND_RECIPE,
    KIND_RECORD,
    KIND_SEGMENT,
    assemble_pack,
    compress_frames,
    encode_pack,
    encode_recipe,
    pack_frames,
)
from otel_replay.store._reader import PackFile, Reader
from otel_replay.store._segments import Shapes, split_known

__all__ = [
    "COMPACT_AFTER",
    "FLUSH_LEVEL",
    "PackJob",
    "Packer",
    "SealedPack",
    "StreamWriter",
    "compact",
    "compact_level",
]

FLUSH_LEVEL = 3
"""zstd level of per-flush packs: ~90 MB/s here, so a flush stays cheap on the exporter."""

COMPACT_AFTER = 16
"""After this many flushes of a stream, the packs they wrote are merged into one."""

SMALL_PACK = 4 << 20
"""Packs smaller than this (bytes on disk) are merged by compaction; larger ones stay."""

SMALL_RAW = 64 << 10
"""A stream whose writer is closed early (see ``_flush.MAX_WRITERS``) is compacted only when
it has :data:`COMPACT_EARLY` fresh packs or more, holding less than this many bytes of objects
on average: the packs of a burst are large enough to compress well alone, and recompressing
them would stall the writer (``gc`` and ``Store.compact`` merge them later)."""

COMPACT_EARLY = 4
"""Fresh packs a stream closed early needs before it is compacted (see :data:`SMALL_RAW`)."""

GROUP_RAW = 2 << 20
"""Bytes of packs :class:`Packer` hands to its compressing thread at a time."""

GROUP_BYTES = 16 << 20
"""Compaction stops adding packs to a merge past this many bytes on disk."""

PROBE_HEAD = 64
"""Bytes at the start of a segment by which :meth:`StreamWriter.probe` finds candidates."""

PROBE_CANDIDATES = 8
"""Segments kept per distinct start (the most recent ones)."""

RECENT_BYTES = 512 << 10
"""Bytes of segments each stream keeps in memory for the probe at least; twice its largest
split body when that is more. The least recently used go first. Segments are deduplicated by
the probe alone: a request's segments are found again by the next request of the same
conversation, which re-sends them, so none has to be hashed."""


def compact_level(raw_bytes: int) -> int:
    """zstd level for a compacted pack holding ``raw_bytes`` of objects.

    Level 19 wins ~5-10% over 9 on chat text but runs at ~2 MB/s here, so it is kept for
    merges of up to 1 MiB (at most half a second); level 9 (~25 MB/s) up to 16 MiB; level 3
    beyond.
    """
    if raw_bytes <= 1 << 20:
        return 19
    return 9 if raw_bytes <= 16 << 20 else 3


@dataclass(slots=True)
class SealedPack:
    """A pack built by :meth:`StreamWriter.seal`, not yet published."""

    rel: str
    first: int
    last: int
    data: bytes
    raw_bytes: int


def _whole_key(data: bytes) -> bytes:
    """Length and two samples of ``data``: bodies of one conversation share their start and
    often their end, not the middle. (Bytes: no container for the collector to track.)"""
    middle = len(data) // 2
    return len(data).to_bytes(8, "little") + data[middle : middle + 16] + data[-16:]


@dataclass(slots=True)
class StreamWriter:
    """The objects one writer adds to one run: numbering, dedup and the pending pack.

    Not thread-safe: the store calls it under its write lock.
    """

    run_id: str
    stream: int
    next_oid: int = 0
    fresh: int = 0
    """Packs published since the last compaction."""
    fresh_start: int = 0
    """The first object of those packs."""
    fresh_raw: int = 0
    """Bytes of objects in those packs."""
    _known: dict[bytes, int] = field(default_factory=dict)
    _pending: list[tuple[int, bytes]] = field(default_factory=list)
    _pending_known: dict[bytes, int] = field(default_factory=dict)
    _first_pending: int = 0
    _recent: OrderedDict[int, bytes] = field(default_factory=OrderedDict)
    """Segments for the probe, by object number, least recently used first."""
    _heads: dict[bytes, tuple[int, ...]] = field(default_factory=dict)
    """Candidates by their first bytes (tuples of numbers, which the garbage collector stops
    tracking, where lists would weigh on every full collection)."""
    _recent_bytes: int = 0
    _recent_cap: int = RECENT_BYTES
    _shapes: Shapes = field(default_factory=Shapes)
    _whole: dict[bytes, int] = field(default_factory=dict)
    _whole_data: dict[bytes, bytes] = field(default_factory=dict)
    """Objects put whole since the last seal (numbers, bytes) by :func:`_whole_key`, the first
    of each key (for span strings that
    repeat a body of the same flush)."""

    def lookup(self, digest: bytes) -> int | None:
        """The number of the object put with sha256 ``digest`` (a body, a span string), or
        None when this writer has put none."""
        oid = self._known.get(digest)
        return oid if oid is not None else self._pending_known.get(digest)

    def _add(self, kind: int, data: bytes, digest: bytes | None) -> int:
        oid = self.next_oid
        self.next_oid += 1
        self._pending.append((kind, data))
        if digest is not None:
            self._pending_known[digest] = oid
        return oid

    def probe(self, body: bytes, pos: int) -> tuple[int, int] | None:
        """``(end, object number)`` of a remembered segment that ``body`` repeats at ``pos``
        (see ``_segments.Probe``)."""
        oids = self._heads.get(body[pos : pos + PROBE_HEAD])
        if oids is not None:
            for oid in reversed(oids):
                segment = self._recent[oid]
                if body.startswith(segment, pos):
                    self._recent.move_to_end(oid)
                    return pos + len(segment), oid
        return None

    def _remember(self, oid: int, segment: bytes) -> None:
        """Offer a segment to the probe (only values that end where their bytes end)."""
        if oid in self._recent:
            self._recent.move_to_end(oid)
            return
        if segment[:1] not in (b"{", b"[", b'"'):
            return
        head = segment[:PROBE_HEAD]
        oids = (*self._heads.get(head, ()), oid)
        self._heads[head] = oids
        self._recent[oid] = segment
        self._recent_bytes += len(segment)
        if len(oids) > PROBE_CANDIDATES:
            self._forget(oids[0])
        while self._recent_bytes > self._recent_cap and len(self._recent) > 1:
            self._forget(next(iter(self._recent)))

    def _forget(self, oid: int) -> None:
        segment = self._recent.pop(oid)
        self._recent_bytes -= len(segment)
        head = segment[:PROBE_HEAD]
        oids = tuple(other for other in self._heads[head] if other != oid)
        if oids:
            self._heads[head] = oids
        else:
            del self._heads[head]

    def _segment(self, data: bytes) -> int:
        """A segment the probe did not recognise: a new object (not hashed: segments are
        deduplicated by the probe, which keeps every segment of the previous request)."""
        oid = self._add(KIND_SEGMENT, data, None)
        self._remember(oid, data)
        return oid

    def put(self, data: bytes, digest: bytes | None = None, *, segment: bool = True) -> int:
        """Store ``data`` (once) and return its object number.

        ``digest`` is its sha256 when the caller already has it. With ``segment`` set, a JSON
        body is split and stored as a recipe over its segments.
        """
        if digest is None:
            digest = hashlib.sha256(data).digest()
        oid = self.lookup(digest)
        if oid is None:
            oid = self._store(data, digest) if segment else self._add(KIND_RAW, data, digest)
        self._put_whole(data, oid)
        return oid

    def _put_whole(self, data: bytes, oid: int) -> None:
        key = _whole_key(data)
        if key not in self._whole:  # another object with that key only misses this shortcut
            self._whole[key] = oid
            self._whole_data[key] = data

    def _store(self, data: bytes, digest: bytes) -> int:
        ranges = split_known(data, self.probe, self._shapes)
        if not ranges:
            return self._add(KIND_RAW, data, digest)
        parts: list[bytes | int] = []
        pos = 0
        for start, end, known in ranges:
            if start > pos:
                parts.append(data[pos:start])
            parts.append(known if known >= 0 else self._segment(data[start:end]))
            pos = end
        if pos < len(data):
            parts.append(data[pos:])
        # Room for all of this body's segments: the next request finds them all again.
        self._recent_cap = max(self._recent_cap, 2 * len(data))
        return self._add(KIND_RECIPE, encode_recipe(parts, digest), digest)

    def put_string(self, data: bytes, *, segment: bool = True) -> int:
        """:meth:`put` for bytes whose digest is not known yet (a span's string); its object
        number.

        Bytes equal to an object put whole since the last seal (a span's copy of its step's
        body, a string every span of the flush repeats) are matched by comparison, without
        hashing. Others are hashed and deduplicated like :meth:`put` when ``segment`` is set;
        without it (a burst: ``_flush.WHOLE_STEPS``) they are stored whole, unhashed, and the
        pack's zstd frame takes care of what they repeat.
        """
        key = _whole_key(data)
        if self._whole_data.get(key) == data:
            return self._whole[key]
        if segment:
            return self.put(data, hashlib.sha256(data).digest())
        oid = self._add(KIND_RAW, data, None)
        self._put_whole(data, oid)
        return oid

    def add_record(self, data: bytes) -> int:
        """Append a flush record (never deduplicated) and return its object number."""
        return self._add(KIND_RECORD, data, None)

    @property
    def has_pending(self) -> bool:
        """Whether objects were added since the last seal."""
        return bool(self._pending)

    @property
    def worth_compacting(self) -> bool:
        """Whether the fresh packs are many and small enough to merge when the writer is
        closed early (see :data:`SMALL_RAW`)."""
        return self.fresh >= COMPACT_EARLY and self.fresh_raw < self.fresh * SMALL_RAW

    def seal(self) -> PackJob:
        """What the pack of everything added since the last seal is built from (by a
        :class:`Packer`); nothing is published yet."""
        first, last = self._first_pending, self.next_oid - 1
        rel = pack_path(self.run_id, self.stream, first, last)
        return (rel, first, last, list(self._pending))

    def published(self, sealed: SealedPack) -> None:
        """The sealed pack is durable: its objects become dedup targets."""
        self._known.update(self._pending_known)
        self._pending.clear()
        self._pending_known.clear()
        self._whole.clear()
        self._whole_data.clear()
        self._first_pending = self.next_oid
        if not self.fresh:
            self.fresh_start = sealed.first
        self.fresh += 1
        self.fresh_raw += sealed.raw_bytes

    def rollback(self) -> None:
        """Forget the pending objects (their pack was never published)."""
        if not self._pending:
            return
        self._pending.clear()
        self._pending_known.clear()
        self._whole.clear()
        self._whole_data.clear()
        for oid in [oid for oid in self._recent if oid >= self._first_pending]:
            self._forget(oid)
        self.next_oid = self._first_pending

    def compacted(self) -> None:
        """The fresh packs were merged."""
        self.fresh = 0
        self.fresh_raw = 0
        self.fresh_start = self.next_oid


PackJob = tuple[str, int, int, list[tuple[int, bytes]]]
"""A pack to build: its path, first and last object numbers, and its objects."""

_Frames = tuple[PackJob, list[int], list[bytes]]

_pools: dict[str, tuple[int, ThreadPoolExecutor]] = {}
"""Thread pools by name, with the process they belong to (a forked child starts its own)."""
_pool_lock = threading.Lock()


def _compressing_thread() -> ThreadPoolExecutor | None:
    """The process's thread that compresses packs beside the flushing thread (a forked child
    starts its own), or None with one CPU."""
    if (os.cpu_count() or 1) < 2:
        return None
    with _pool_lock:
        pool = _pools.get("pack")
        if pool is None or pool[0] != os.getpid():
            pool = _pools["pack"] = (os.getpid(), ThreadPoolExecutor(1, "otel-replay-pack"))
        return pool[1]


class Packer:
    """Builds the packs of one flush, compressing them on another CPU while the flush goes on
    encoding the next runs.

    zstd releases the GIL while it compresses, so a thread beside the flushing one works in
    parallel; it needs the GIL only to start and end a call, which waits for the flushing
    thread's switch interval, so packs are handed over in groups (:data:`GROUP_RAW`) that it
    compresses in one call each. A flush of one pack compresses it itself.
    """

    def __init__(self) -> None:
        self._done: list[tuple[list[_Frames], Future[list[bytes]] | None]] = []
        self._group: list[_Frames] = []
        self._group_raw = 0

    def add(self, job: PackJob) -> None:
        """Queue the pack of ``job`` (see :meth:`StreamWriter.seal`)."""
        counts, frames = pack_frames(job[3])
        self._group.append((job, counts, frames))
        self._group_raw += sum(len(frame) for frame in frames)
        if self._group_raw >= GROUP_RAW:
            self._hand_over()

    def _hand_over(self) -> None:
        if not self._group:
            return
        frames = [frame for _, _, group_frames in self._group for frame in group_frames]
        thread = _compressing_thread() if self._done or len(self._group) > 1 else None
        future = None if thread is None else submit(thread, compress_frames, frames, FLUSH_LEVEL)
        self._done.append((self._group, future))
        self._group, self._group_raw = [], 0

    def finish(self) -> list[SealedPack]:
        """The packs, in the order they were added."""
        self._hand_over()
        sealed: list[SealedPack] = []
        for group, future in self._done:
            if future is None:
                compressed = compress_frames(
                    [frame for _, _, frames in group for frame in frames], FLUSH_LEVEL
                )
            else:
                compressed = future.result()
            at = 0
            for (rel, first, last, entries), counts, frames in group:
                mine = compressed[at : at + len(frames)]
                at += len(frames)
                data = assemble_pack(first, entries, counts, mine, FLUSH_LEVEL)
                sealed.append(
                    SealedPack(rel, first, last, data, sum(len(item) for _, item in entries))
                )
        return sealed


def _groups(packs: list[PackFile], sizes: dict[str, int]) -> list[list[PackFile]]:
    """Runs of adjacent small packs worth merging (two or more, up to GROUP_BYTES)."""
    groups: list[list[PackFile]] = []
    current: list[PackFile] = []
    for pack in packs:
        small = sizes.get(pack.rel, 0) < SMALL_PACK
        adjacent = current and pack.first <= current[-1].last + 1
        if small and adjacent and sum(sizes[p.rel] for p in current) < GROUP_BYTES:
            current.append(pack)
            continue
        if len(current) > 1:
            groups.append(current)
        current = [pack] if small else []
    if len(current) > 1:
        groups.append(current)
    return groups


def compact(
    backend: Backend, reader: Reader, run_id: str, stream: int, *, start: int = 0
) -> tuple[int, int]:
    """Merge the stream's adjacent small packs (those from object ``start`` on) into one;
    ``(packs removed, bytes saved)``.

    Safe while other processes read the stream, and while its writer keeps appending (new
    packs only hold higher object numbers). The merged pack is published (and synced) before
    the small ones are deleted.
    """
    listed = reader.list_packs(run_id, stream)
    prefix = stream_label(run_id, stream) + "-"
    sizes = {
        rel: size
        for rel, (size, _) in backend.find(run_dir(run_id)).items()
        if rel.startswith(prefix)
    }
    removed = saved = 0
    chosen = [p for p in reader.packs(run_id, stream, refresh=True) if p.first >= start]
    for group in _groups(chosen, sizes):
        first, last = group[0].first, group[-1].last
        entries = [reader.raw(run_id, stream, oid) for oid in range(first, last + 1)]
        raw = sum(len(data) for _, data in entries)
        data = encode_pack(first, entries, compact_level(raw))
        rel = pack_path(run_id, stream, first, last)
        backend.publish(rel, data, replace=False)
        backend.sync()
        before = 0
        for old in listed:
            if first <= old.first and old.last <= last and old.rel != rel:
                backend.delete(old.rel)
                before += sizes[old.rel]
                removed += 1
        saved += before - len(data)
    backend.sync()
    reader.forget(run_id, stream)
    return removed, saved
