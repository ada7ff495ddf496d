"""Writing objects: one stream per run per writer, deduplicated, packed per flush.

Dedup and compression, the design:

* A body is stored once per stream, keyed by the sha256 of its exact bytes. A JSON body is
  split (``_segments``) at the elements of its message and tool arrays; each element is stored
  once, and the body becomes a *recipe*: skeleton bytes plus references to elements. Request
  *n* of a conversation therefore costs its new messages plus a few bytes of recipe.
* References are object numbers within the stream, not 32-byte hashes: a 60-message request
  would otherwise carry 2 KB of incompressible hashes. Consecutive references cost a byte.
* A flush writes one pack per stream with everything new, its objects sharing zstd frames
  (level :data:`FLUSH_LEVEL`): fast, and small objects compress together.
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
77 KB of unique objects, 16 KB once compacted (records: 6 KB; recipes: 0.3 KB).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from otel_replay.store._format import pack_name, stream_dir
from otel_replay.store._fs import Backend
from otel_replay.store._pack import (
    KIND_RAW,
    KIND_RECIPE,
    KIND_RECORD,
    encode_pack,
    encode_recipe,
)
from otel_replay.store._reader import PackFile, Reader
from otel_replay.store._segments import split

__all__ = ["COMPACT_AFTER", "FLUSH_LEVEL", "SealedPack", "StreamWriter", "compact", "compact_level"]

FLUSH_LEVEL = 3
"""zstd level of per-flush packs: ~90 MB/s here, so a flush stays cheap on the exporter."""

COMPACT_AFTER = 16
"""After this many flushes of a stream, the packs they wrote are merged into one."""

SMALL_PACK = 4 << 20
"""Packs smaller than this (bytes on disk) are merged by compaction; larger ones stay."""


GROUP_BYTES = 16 << 20
"""Compaction stops adding packs to a merge past this many bytes on disk."""


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
    _known: dict[bytes, int] = field(default_factory=dict)
    _pending: list[tuple[int, bytes]] = field(default_factory=list)
    _pending_known: dict[bytes, int] = field(default_factory=dict)
    _first_pending: int = 0

    @property
    def dir(self) -> str:
        """The stream's directory relative to the store root."""
        return stream_dir(self.run_id, self.stream)

    def _lookup(self, digest: bytes) -> int | None:
        oid = self._known.get(digest)
        return oid if oid is not None else self._pending_known.get(digest)

    def _add(self, kind: int, data: bytes, digest: bytes | None) -> int:
        oid = self.next_oid
        self.next_oid += 1
        self._pending.append((kind, data))
        if digest is not None:
            self._pending_known[digest] = oid
        return oid

    def put(self, data: bytes, digest: bytes | None = None, *, segment: bool = True) -> int:
        """Store ``data`` (once) and return its object number.

        ``digest`` is its sha256 when the caller already has it. With ``segment`` set, a JSON
        body is split and stored as a recipe over its segments.
        """
        if digest is None:
            digest = hashlib.sha256(data).digest()
        found = self._lookup(digest)
        if found is not None:
            return found
        ranges = split(data) if segment else []
        if not ranges:
            return self._add(KIND_RAW, data, digest)
        parts: list[bytes | int] = []
        pos = 0
        for start, end in ranges:
            if start > pos:
                parts.append(data[pos:start])
            parts.append(self.put(data[start:end], segment=False))
            pos = end
        if pos < len(data):
            parts.append(data[pos:])
        return self._add(KIND_RECIPE, encode_recipe(parts), digest)

    def add_record(self, data: bytes) -> int:
        """Append a flush record (never deduplicated) and return its object number."""
        return self._add(KIND_RECORD, data, None)

    @property
    def has_pending(self) -> bool:
        """Whether objects were added since the last seal."""
        return bool(self._pending)

    def seal(self) -> SealedPack:
        """Build the pack of everything added since the last seal (not yet published)."""
        first, last = self._first_pending, self.next_oid - 1
        data = encode_pack(first, self._pending, FLUSH_LEVEL)
        raw = sum(len(item) for _, item in self._pending)
        return SealedPack(f"{self.dir}/{pack_name(first, last)}", first, last, data, raw)

    def published(self, sealed: SealedPack) -> None:
        """The sealed pack is durable: its objects become dedup targets."""
        self._known.update(self._pending_known)
        self._pending.clear()
        self._pending_known.clear()
        self._first_pending = self.next_oid
        if not self.fresh:
            self.fresh_start = sealed.first
        self.fresh += 1

    def rollback(self) -> None:
        """Forget the pending objects (their pack was never published)."""
        self._pending.clear()
        self._pending_known.clear()
        self.next_oid = self._first_pending

    def compacted(self) -> None:
        """The fresh packs were merged."""
        self.fresh = 0
        self.fresh_start = self.next_oid


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
    sizes = {rel: size for rel, (size, _) in backend.find(stream_dir(run_id, stream)).items()}
    removed = saved = 0
    chosen = [p for p in reader.packs(run_id, stream, refresh=True) if p.first >= start]
    for group in _groups(chosen, sizes):
        first, last = group[0].first, group[-1].last
        entries = [reader.raw(run_id, stream, oid) for oid in range(first, last + 1)]
        raw = sum(len(data) for _, data in entries)
        data = encode_pack(first, entries, compact_level(raw))
        rel = f"{stream_dir(run_id, stream)}/{pack_name(first, last)}"
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
