"""Bodies as content-addressed objects: chunks, manifests (their layout and reading:
``_manifest``), and deciding what is new."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from otel_replay.store._manifest import LITERAL, REF, ManifestError, decode_manifest, manifest_refs
from otel_replay.store._pack import KIND_CHUNK, KIND_MANIFEST, PackBuilder
from otel_replay.store._segments import Previous, Recent, Shapes, split

__all__ = [
    "Batch",
    "Bodies",
    "ManifestError",
    "decode_manifest",
    "manifest_refs",
]

_REF_BYTE = bytes([REF])
_ONE_BYTE_LITERAL = bytes([LITERAL, 1])
"""The head of a literal part of one byte: its tag and length."""


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _literal(out: bytearray, data: bytes) -> None:
    """Append a literal part holding ``data`` to a manifest."""
    out.append(LITERAL)
    if len(data) < 0x80:  # most literals are a comma: a one-byte length
        out.append(len(data))
    else:
        out += _varint(len(data))
    out += data


Exists = Callable[[list[bytes]], set[bytes]]
"""``exists(digests)``: those of ``digests`` the store already holds."""


@dataclass(slots=True)
class _Split:
    digest: bytes
    data: bytes
    manifest: bytes
    segments: list[tuple[int, int, bytes]]
    """Each chunk's range in ``data`` and digest (sliced only when it is stored)."""


@dataclass(slots=True)
class Bodies:
    """The bodies a flush references, by sha256, in the order they were put.

    A body's *stream* (any hashable: a run's requests, one span attribute of a run) names
    the bodies that grow one from the other, so the next one is split faster
    (:class:`~._segments.Previous`).
    """

    data: dict[bytes, bytes] = field(default_factory=dict)
    streams: dict[bytes, object] = field(default_factory=dict)

    def add(self, data: bytes, digest: bytes, stream: object = None) -> None:
        """A body (``digest``: its sha256), in ``stream`` when given."""
        if digest not in self.data:
            self.data[digest] = data
            if stream is not None:
                self.streams[digest] = stream

    def update(self, later: Bodies) -> None:
        """Add the bodies of ``later`` after these."""
        self.data.update(later.data)  # a body already here keeps its place: the same bytes
        for digest, stream in later.streams.items():
            self.streams.setdefault(digest, stream)

    def __len__(self) -> int:
        return len(self.data)


@dataclass(slots=True)
class Batch:
    """The new objects of one flush, deduplicated against each other and the store.

    :meth:`resolve` asks the store, in two batched questions (bodies, then the chunks of
    new bodies), what it already holds of the flush's bodies and adds what it lacks to
    :attr:`pack`.
    """

    shapes: Shapes = field(default_factory=Shapes)
    recent: Recent = field(default_factory=Recent)
    previous: Previous = field(default_factory=Previous)
    pack: PackBuilder = field(default_factory=PackBuilder)
    """The new objects, in the order their bodies were put (after :meth:`resolve`)."""

    def resolve(self, bodies: Bodies, exists: Exists) -> None:
        """Decide what is new: bodies the store lacks, split into the chunks it lacks."""
        held = exists(list(bodies.data))
        splits: list[_Split] = []
        pack, shapes, recent, previous = self.pack, self.shapes, self.recent, self.previous
        streams = bodies.streams
        for digest, data in bodies.data.items():
            if digest in held:
                continue
            stream = streams.get(digest)
            known_at = None if stream is None else previous.known(stream, data)
            ranges = split(data, shapes, recent, known_at)
            if not ranges or (len(ranges) == 1 and ranges[0][2] is None):
                # Nothing to split, or one new element: a manifest would only add an object.
                pack.add(digest, KIND_CHUNK, data)
                continue
            manifest, segments = self._manifest(data, ranges)
            if stream is not None:
                previous.learn(stream, data, segments)
            splits.append(_Split(digest, data, manifest, segments))
        if not splits:
            return
        flushed = bodies.data
        wanted = dict.fromkeys(d for s in splits for _, _, d in s.segments if d not in flushed)
        # Chunks not to add: held by the store, added already, or a body of this flush (a
        # chunk that is also a body is stored as that body: a reference names content,
        # whichever way the content is kept).
        skip: set[bytes] = set(exists(list(wanted))) if wanted else set()
        skip.update(flushed)
        add = pack.add
        for item in splits:
            add(item.digest, KIND_MANIFEST, item.manifest)
            view: memoryview | None = None
            for start, end, chunk_digest in item.segments:
                if chunk_digest in skip:
                    continue
                skip.add(chunk_digest)
                if view is None:
                    view = memoryview(item.data)
                add(chunk_digest, KIND_CHUNK, view[start:end])

    def _manifest(
        self, data: bytes, ranges: list[tuple[int, int, bytes | None]]
    ) -> tuple[bytes, list[tuple[int, int, bytes]]]:
        """The manifest of ``data`` split at ``ranges`` (layout in the module docstring), and
        each chunk's range and digest; new chunks are hashed and remembered."""
        manifest = bytearray()
        segments: list[tuple[int, int, bytes]] = []
        sha256, learn = hashlib.sha256, self.recent.learn
        pos = 0
        for start, end, remembered in ranges:
            if start == pos + 1:  # most literals are the comma between two elements
                manifest += _ONE_BYTE_LITERAL
                manifest.append(data[pos])
            elif start > pos:
                _literal(manifest, data[pos:start])
            if remembered is None:
                chunk = data[start:end]
                chunk_digest = sha256(chunk).digest()
                learn(chunk, chunk_digest)
            else:
                chunk_digest = remembered
            manifest += _REF_BYTE
            manifest += chunk_digest
            segments.append((start, end, chunk_digest))
            pos = end
        if pos < len(data):
            _literal(manifest, data[pos:])
        return bytes(manifest), segments
