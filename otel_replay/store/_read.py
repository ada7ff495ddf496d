"""Reading objects back: locate, read one frame, assemble manifests, check every hash."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable

from otel_replay.errors import CorruptBlobError
from otel_replay.store._format import pack_path
from otel_replay.store._fs import Backend
from otel_replay.store._manifest import ManifestError, decode_manifest
from otel_replay.store._pack import KIND_MANIFEST, PackError, decompress_frame
from otel_replay.store._rows import Located

__all__ = ["MAX_DEPTH", "ObjectReader"]

FRAMES_CACHED = 16
"""Decompressed frames kept: the chunks of one conversation sit in a few frames."""

MAX_DEPTH = 4
"""Manifests nest this deep at most (a chunk may be stored as a manifest of its own)."""

Locate = Callable[[bytes], "Located | None"]
"""``locate(digest)``: where the object is, from the index, or None."""


class ObjectReader:
    """Reads objects of a store by digest; thread-safe.

    ``locate`` asks the index; ``relocate`` is called once when a pack has gone (a repack
    moved its objects, or, for a remote store, another machine did) and should bring the
    index up to date before the object is located again.
    """

    def __init__(
        self, backend: Backend, locate: Locate, relocate: Callable[[], None] | None = None
    ) -> None:
        self._backend = backend
        self._locate = locate
        self._relocate = relocate
        self._frames: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._lock = threading.Lock()

    def _frame(self, where: Located, digest: bytes) -> bytes:
        key = (where.pack, where.frame_offset)
        with self._lock:
            cached = self._frames.get(key)
            if cached is not None:
                self._frames.move_to_end(key)
                return cached
        rel = pack_path(where.pack)
        data = self._backend.read_range(
            rel, where.frame_offset, where.frame_offset + where.frame_size
        )
        if len(data) != where.frame_size:
            raise CorruptBlobError(
                f"object sha256:{digest.hex()}: pack {self._backend.location}/{rel} is truncated"
            )
        try:
            content = decompress_frame(data)
        except PackError as exc:
            raise CorruptBlobError(
                f"object sha256:{digest.hex()}: pack {self._backend.location}/{rel}: frame at "
                f"byte {where.frame_offset}: {exc}"
            ) from None
        with self._lock:
            self._frames[key] = content
            while len(self._frames) > FRAMES_CACHED:
                self._frames.popitem(last=False)
        return content

    def raw(self, digest: bytes) -> tuple[int, bytes]:
        """An object's kind and stored bytes (not assembled, not checked)."""
        where = self._locate(digest)
        if where is None and self._relocate is not None:
            self._relocate()
            where = self._locate(digest)
        if where is None:
            raise CorruptBlobError(
                f"object sha256:{digest.hex()} is not in the store {self._backend.location}"
            )
        try:
            frame = self._frame(where, digest)
        except FileNotFoundError:
            if self._relocate is None:
                raise CorruptBlobError(
                    f"pack {self._backend.location}/{pack_path(where.pack)} is missing"
                ) from None
            self._relocate()
            moved = self._locate(digest)
            try:
                if moved is None or moved == where:
                    raise FileNotFoundError
                where, frame = moved, self._frame(moved, digest)
            except FileNotFoundError:  # gone too (another machine's gc or merge)
                raise CorruptBlobError(
                    f"pack {self._backend.location}/{pack_path(where.pack)} is missing"
                ) from None
        data = frame[where.offset : where.offset + where.size]
        if len(data) != where.size:
            raise CorruptBlobError(
                f"pack {self._backend.location}/{pack_path(where.pack)}: object "
                f"sha256:{digest.hex()} lies outside its frame"
            )
        return where.kind, data

    def content(self, digest: bytes, *, depth: int = 0) -> bytes:
        """The content of object ``digest``, checked against it; CorruptBlobError naming the
        object when it cannot be read or does not match."""
        kind, data = self.raw(digest)
        if kind == KIND_MANIFEST:
            if depth >= MAX_DEPTH:
                raise CorruptBlobError(f"object sha256:{digest.hex()} nests too deep")
            try:
                parts = decode_manifest(data)
            except ManifestError as exc:
                raise CorruptBlobError(f"manifest sha256:{digest.hex()}: {exc}") from None
            data = b"".join(
                self.content(part[0], depth=depth + 1) if isinstance(part, tuple) else part
                for part in parts
            )
        if hashlib.sha256(data).digest() != digest:
            raise CorruptBlobError(
                f"object sha256:{digest.hex()} in the store {self._backend.location} does not "
                "match its hash"
            )
        return data

    def forget(self) -> None:
        """Drop cached frames (after a repack, say)."""
        with self._lock:
            self._frames.clear()
