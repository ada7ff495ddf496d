"""Reading objects back: pack lookup, frame cache, recipe reassembly, hash checks.

Thread-safe: any number of threads may read through one :class:`Reader`. Pack files are
immutable once published, but compaction replaces several small packs of a stream with one
larger pack and deletes the small ones, possibly while another process reads. A read that
finds its pack gone (or unreadable) therefore lists the stream again and retries once before
reporting damage.
"""

from __future__ import annotations

import bisect
import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

from otel_replay.errors import CorruptBlobError
from otel_replay.store._format import pack_path, parse_pack_name, run_dir, stream_label
from otel_replay.store._fs import Backend
from otel_replay.store._pack import (
    FOOTER,
    KIND_RECIPE,
    RECIPE_CHECK,
    PackError,
    PackIndex,
    decode_recipe,
    decompress_frame,
    parse_footer,
    parse_trailer,
)

__all__ = ["PackFile", "Reader", "cover"]

_TAIL_READ = 64 * 1024
_MAX_NESTING = 8


@dataclass(frozen=True, slots=True)
class PackFile:
    """A pack of a stream: the object numbers it holds and its path under the root."""

    first: int
    last: int
    rel: str


def cover(packs: list[PackFile]) -> list[PackFile]:
    """The packs to read from: widest first, each one extending what the previous cover.

    After a compaction (or one interrupted half-way) a stream can hold a merged pack next to
    the small packs it replaces; the merged one wins and the small ones are never read.
    """
    chosen: list[PackFile] = []
    covered = -1
    for pack in sorted(packs, key=lambda p: (p.first, -p.last)):
        if pack.last > covered:
            chosen.append(pack)
            covered = pack.last
    return chosen


class Reader:
    """Reads objects of any stream of one store, with a bounded cache of decompressed
    frames (``cache_bytes``) and of pack trailers."""

    def __init__(self, backend: Backend, cache_bytes: int = 32 << 20) -> None:
        self.backend = backend
        self._lock = threading.Lock()
        self._covers: dict[tuple[str, int], list[PackFile]] = {}
        self._indexes: OrderedDict[str, PackIndex] = OrderedDict()
        self._frames: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._frame_bytes = 0
        self._cache_bytes = cache_bytes

    # -- pack lists ---------------------------------------------------------------------

    def list_packs(self, run_id: str, stream: int) -> list[PackFile]:
        """Every pack file of the stream, as listed now (including redundant ones)."""
        base = run_dir(run_id)
        found = []
        for name in self.backend.listdir(base):
            parsed = parse_pack_name(name)
            if parsed is not None and parsed[0] == stream:
                found.append(PackFile(parsed[1], parsed[2], f"{base}/{name}"))
        return found

    def packs(self, run_id: str, stream: int, *, refresh: bool = False) -> list[PackFile]:
        """The cover of the stream's packs (cached until ``refresh`` or :meth:`forget`)."""
        key = (run_id, stream)
        with self._lock:
            cached = self._covers.get(key)
        if cached is not None and not refresh:
            return cached
        chosen = cover(self.list_packs(run_id, stream))
        with self._lock:
            self._covers[key] = chosen
        return chosen

    def note_pack(self, run_id: str, stream: int, first: int, last: int) -> None:
        """Tell the cache about a pack this process just published (saves a listing)."""
        key = (run_id, stream)
        pack = PackFile(first, last, pack_path(run_id, stream, first, last))
        with self._lock:
            if key in self._covers:
                self._covers[key] = cover([*self._covers[key], pack])

    def forget(self, run_id: str, stream: int) -> None:
        """Drop what is cached about a stream: its pack list, trailers and frames (its packs
        changed, or they are about to be re-checked)."""
        prefix = stream_label(run_id, stream) + "-"
        with self._lock:
            self._covers.pop((run_id, stream), None)
            for rel in [rel for rel in self._indexes if rel.startswith(prefix)]:
                del self._indexes[rel]
            for key in [key for key in self._frames if key[0].startswith(prefix)]:
                self._frame_bytes -= len(self._frames.pop(key))

    # -- raw objects --------------------------------------------------------------------

    def pack_index(self, rel: str) -> PackIndex:
        """The parsed trailer of a pack (cached). PackError when it is damaged."""
        with self._lock:
            cached = self._indexes.get(rel)
            if cached is not None:
                self._indexes.move_to_end(rel)
                return cached
        tail = self.backend.read_tail(rel, _TAIL_READ)
        if len(tail) < FOOTER.size:
            raise PackError("file is shorter than a pack footer")
        trailer_size, crc = parse_footer(tail[-FOOTER.size :])
        if trailer_size + FOOTER.size <= len(tail):
            trailer = tail[-FOOTER.size - trailer_size : -FOOTER.size]
        else:
            size = self.backend.size(rel)
            start = size - FOOTER.size - trailer_size
            if start < 0:
                raise PackError("pack trailer size is larger than the file")
            trailer = self.backend.read_range(rel, start, size - FOOTER.size)
        whole = len(tail) < _TAIL_READ
        index = parse_trailer(trailer, crc, len(tail) if whole else None)
        if not whole and index.size < len(tail):
            raise PackError("pack trailer does not match the file size")
        with self._lock:
            self._indexes[rel] = index
            while len(self._indexes) > 4096:
                self._indexes.popitem(last=False)
        return index

    def frame(self, rel: str, index: PackIndex, number: int) -> bytes:
        """Frame ``number`` of a pack, decompressed and checked (cached)."""
        key = (rel, number)
        with self._lock:
            cached = self._frames.get(key)
            if cached is not None:
                self._frames.move_to_end(key)
                return cached
        start, end, size = index.frames[number]
        data = decompress_frame(self.backend.read_range(rel, start, end), size)
        with self._lock:
            if key not in self._frames:
                self._frames[key] = data
                self._frame_bytes += len(data)
            while self._frame_bytes > self._cache_bytes and len(self._frames) > 1:
                _, dropped = self._frames.popitem(last=False)
                self._frame_bytes -= len(dropped)
        return data

    def _find(self, run_id: str, stream: int, oid: int, refresh: bool) -> PackFile:
        packs = self.packs(run_id, stream, refresh=refresh)
        at = bisect.bisect_right([p.first for p in packs], oid) - 1
        if at < 0 or packs[at].last < oid:
            raise FileNotFoundError(f"no pack of {stream_label(run_id, stream)} holds object {oid}")
        return packs[at]

    def raw(self, run_id: str, stream: int, oid: int) -> tuple[int, bytes]:
        """``(kind, bytes)`` of one object as stored. CorruptBlobError when it is missing or
        its pack is damaged (after one retry with a fresh listing)."""
        for attempt in (0, 1):
            pack: PackFile | None = None
            try:
                pack = self._find(run_id, stream, oid, refresh=attempt > 0)
                index = self.pack_index(pack.rel)
                where = index.locate(oid)
                data = self.frame(pack.rel, index, where.frame)
                return where.kind, data[where.offset : where.offset + where.length]
            except (FileNotFoundError, PackError, KeyError) as exc:
                self.forget(run_id, stream)
                if attempt:
                    place = f"{self.backend.location}/{pack.rel}" if pack else "its stream"
                    problem = exc.args[0] if isinstance(exc, PackError | FileNotFoundError) else ""
                    raise CorruptBlobError(
                        f"object {oid} of {stream_label(run_id, stream)} cannot be read "
                        f"from {place}: {problem or type(exc).__name__}"
                    ) from None
        raise AssertionError("unreachable")

    # -- bodies ---------------------------------------------------------------------------

    def _assemble(
        self, run_id: str, stream: int, oid: int, depth: int
    ) -> tuple[bytes, bytes | None]:
        """The bytes of an object, a recipe reassembled (its parts checked), and the recipe's
        check (None for an object stored as it is)."""
        kind, data = self.raw(run_id, stream, oid)
        if kind != KIND_RECIPE:
            return data, None
        if depth >= _MAX_NESTING:
            raise CorruptBlobError(
                f"object {oid} of {stream_label(run_id, stream)} nests recipes too deeply"
            )
        try:
            check, parts = decode_recipe(data)
        except PackError as exc:
            raise CorruptBlobError(
                f"object {oid} of {stream_label(run_id, stream)} is a damaged recipe: {exc}"
            ) from None
        joined = b"".join(
            part if isinstance(part, bytes) else self.object(run_id, stream, part, depth + 1)
            for part in parts
        )
        return joined, check

    def _failed_check(self, run_id: str, stream: int, oid: int) -> CorruptBlobError:
        return CorruptBlobError(
            f"object {oid} of {self.backend.location}/{stream_label(run_id, stream)} is rebuilt "
            "into bytes that fail its check"
        )

    def object(self, run_id: str, stream: int, oid: int, _depth: int = 0) -> bytes:
        """The bytes of an object, a recipe reassembled and checked against the hash prefix it
        carries. CorruptBlobError when the object cannot be read or fails its check."""
        data, check = self._assemble(run_id, stream, oid, _depth)
        if check is not None and hashlib.sha256(data).digest()[:RECIPE_CHECK] != check:
            raise self._failed_check(run_id, stream, oid)
        return data

    def hashed(self, run_id: str, stream: int, oid: int) -> tuple[bytes, bytes]:
        """:meth:`object` and its sha256 (for an index rebuilt from the packs)."""
        data, check = self._assemble(run_id, stream, oid, 0)
        digest = hashlib.sha256(data).digest()
        if check is not None and digest[:RECIPE_CHECK] != check:
            raise self._failed_check(run_id, stream, oid)
        return data, digest

    def body(self, run_id: str, stream: int, oid: int, digest: bytes) -> bytes:
        """The bytes of a body, checked against its sha256 ``digest``.

        Raises CorruptBlobError naming the blob (``sha256:<hex>``) when the bytes cannot be
        read or do not hash to ``digest``.
        """
        name = "sha256:" + digest.hex()
        try:
            data, _ = self._assemble(run_id, stream, oid, 0)  # the full hash is checked below
        except CorruptBlobError as exc:
            raise CorruptBlobError(f"blob {name} (run {run_id!r}): {exc}") from None
        if hashlib.sha256(data).digest() != digest:
            raise CorruptBlobError(
                f"blob {name} (run {run_id!r}, object {oid} of "
                f"{self.backend.location}/{stream_label(run_id, stream)}) does not match its hash"
            )
        return data
