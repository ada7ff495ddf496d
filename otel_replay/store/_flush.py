"""A flush: buffered fixtures and spans become packs, then index rows, durably.

Order matters for crash safety. Per run touched, the new objects (deduplicated against the
stream) and one record go into one pack; every pack is written to a temporary file, fsynced
and renamed into place, and the directories are fsynced once each; only then does one SQLite
transaction add the steps. A process killed before the commit leaves packs no index row points
at (``gc`` removes them), never an index row pointing at a missing or partial pack.

What a flush costs whatever its size — the fsyncs, the SQLite commit — is paid once for all
the runs it touches, and a flush of many runs writes and fsyncs their packs from several
threads at once (``_fs.LocalBackend.publish_many``). Compaction never runs in a burst: a
stream closed early to bound the open ones is compacted only if its packs are many and small
(``_stream.StreamWriter.worth_compacting``). ``bench/exporter_throughput.py`` records 10,000
steps (8 KB requests, 4 KB responses, their spans) at about 6,000 steps per second on two CPUs.
"""

from __future__ import annotations

import hashlib
import secrets
from collections import OrderedDict
from typing import Any

from otel_replay.capture._handoff import Fixture
from otel_replay.store._facts import SpanFacts, merge_facts
from otel_replay.store._fs import Backend
from otel_replay.store._index import Index
from otel_replay.store._pack import FRAME_BYTES
from otel_replay.store._reader import Reader
from otel_replay.store._records import encode_record, step_entry
from otel_replay.store._rows import step_row
from otel_replay.store._spans import PreparedSpan, ext_entries, tag_entries
from otel_replay.store._stream import Packer, SealedPack, StreamWriter, compact

__all__ = ["Pending", "PendingSpan", "checked", "write"]

Pending = tuple[Fixture, bytes, bytes | None]
"""A fixture with the sha256 digests of its request and response bodies (None: no response)."""

PendingSpan = tuple[str, PreparedSpan, SpanFacts]
"""A span put: its run id, its record form (JSON and long strings) and its facts.

Nothing in it is a container but tuples of plain values (which the garbage collector stops
tracking): containers kept from ``put`` to the end of a flush of hundreds of steps outlive
several collections, and enough of those set off full collections of the application's whole
heap (in ``bench/exporter_throughput.py`` they had cost a fifth of the writer's time)."""


def _digest(tag: str | None, body: bytes, what: str, fixture: Fixture) -> bytes:
    digest = hashlib.sha256(body).digest()
    if tag != "sha256:" + digest.hex():
        raise ValueError(
            f"run {fixture.run_id!r} step {fixture.step_index}: {what} hash {tag!r} "
            "does not match the body"
        )
    return digest


def checked(fixture: Fixture) -> Pending:
    """The fixture with its body digests, after checking them against its hash tags.

    ValueError when a tag does not match its body: the store never files bytes under a hash
    they do not have.
    """
    if not 0 <= fixture.step_index < 2**31:
        raise ValueError(f"run {fixture.run_id!r}: step index {fixture.step_index} is out of range")
    request = _digest(fixture.request_hash, fixture.request_body, "request", fixture)
    if fixture.response_hash is None:
        return fixture, request, None
    return (
        fixture,
        request,
        _digest(fixture.response_hash, fixture.response_body, "response", fixture),
    )


MAX_WRITERS = 64
"""Streams kept open per store; the least recently written is closed (and compacted) beyond.
Each remembers the digests of its objects for dedup (about 100 bytes per object)."""


def _writer(
    backend: Backend, reader: Reader, writers: OrderedDict[str, StreamWriter], run_id: str
) -> StreamWriter:
    writer = writers.get(run_id)
    if writer is None:
        writer = writers[run_id] = StreamWriter(run_id, secrets.randbits(63))
        while len(writers) > MAX_WRITERS:
            _, done = writers.popitem(last=False)
            if done.worth_compacting:
                compact(backend, reader, done.run_id, done.stream)
    writers.move_to_end(run_id)
    return writer


WHOLE_STEPS = 8
"""A flush that carries this many steps (or spans) of one run, whose bodies and span strings fit
in one zstd frame (``_pack.FRAME_BYTES``), stores them whole instead of splitting them: the
frame holds them all, and zstd finds what they repeat of each other for less than splitting
costs (``bench/exporter_throughput.py``: half as many steps per second again, and a smaller
store). A flush of a step or a few splits them, so that each is deduplicated against earlier
flushes (the history a burst re-sent is stored once more by the first split after it)."""


def _split_bodies(items: list[Pending], spans: list[PendingSpan]) -> bool:
    """Whether a run's part of a flush is split (see :data:`WHOLE_STEPS`)."""
    if max(len(items), len(spans)) < WHOLE_STEPS:
        return True
    size = sum(len(fx.request_body) + len(fx.response_body) for fx, _, _ in items)
    size += sum(len(value) for _, (_, strings, _), _ in spans for value in strings[1::2])
    return size > FRAME_BYTES


def _encode_run(
    writer: StreamWriter,
    items: list[Pending],
    spans: list[PendingSpan],
    facts: Any,
) -> list[tuple[Any, ...]]:
    """Add one run's bodies, spans and record to its stream; the index rows of its steps."""
    split = _split_bodies(items, spans)
    entries = []
    oids = []
    for fx, request, response in items:
        request_oid = writer.put(fx.request_body, request, segment=split)
        response_oid = (
            None if response is None else writer.put(fx.response_body, response, segment=split)
        )
        entries.append(step_entry(fx, request_oid, response_oid))
        oids.append((request_oid, response_oid))
    stored, ext, tags = [], [], []
    for position, (_, (json, strings, hashes), _) in enumerate(spans):
        stored.append(json)
        ext.extend(ext_entries(position, strings, writer.put_string, segment=split))
        tags.extend(tag_entries(position, hashes, writer.lookup))
    record = writer.add_record(encode_record(writer.run_id, entries, stored, ext, tags))
    step_facts = facts.steps if facts is not None else {}
    return [
        step_row(
            record,
            fx.step_index,
            step_oids,
            fx,
            step_facts.get(fx.step_index),
            (request, len(fx.request_body)),
            None if response is None else (response, len(fx.response_body)),
        )
        for step_oids, (fx, request, response) in zip(oids, items, strict=True)
    ]


def _landed(backend: Backend, rel: str) -> bool:
    """Whether a pack of a failed publish is in place after all (its numbers are taken)."""
    try:
        return backend.exists(rel)
    except Exception:
        return False


def write(
    backend: Backend,
    index: Index,
    reader: Reader,
    writers: OrderedDict[str, StreamWriter],
    pending: list[Pending],
    spans: list[PendingSpan],
    *,
    compact_after: int | None,
) -> None:
    """Write one flush (see the module docstring); raises StoreError on I/O failure.

    Objects of packs that were never published are forgotten again; published ones stay
    (they are durable) and the caller may retry the same batch.
    """
    facts = merge_facts((run_id, stated) for run_id, _, stated in spans)
    groups: dict[str, tuple[list[Pending], list[PendingSpan]]] = {}
    for item in pending:
        groups.setdefault(item[0].run_id, ([], []))[0].append(item)
    for pending_span in spans:
        groups.setdefault(pending_span[0], ([], []))[1].append(pending_span)
    touched = [_writer(backend, reader, writers, run_id) for run_id in groups]
    rows: list[tuple[StreamWriter, list[tuple[Any, ...]]]] = []
    sealed: list[tuple[StreamWriter, SealedPack]] = []
    published: list[tuple[StreamWriter, SealedPack]] = []
    try:
        packer = Packer()
        sealing = []
        for writer, (items, run_spans) in zip(touched, groups.values(), strict=True):
            rows.append((writer, _encode_run(writer, items, run_spans, facts.get(writer.run_id))))
            if writer.has_pending:
                packer.add(writer.seal())  # compressed while the next runs are encoded
                sealing.append(writer)
        sealed = list(zip(sealing, packer.finish(), strict=True))
        # Each stream is its writer's alone and its numbers only grow: the names are new.
        try:
            backend.publish_many([(pack.rel, pack.data) for _, pack in sealed])
        except BaseException:
            published = [(w, pack) for w, pack in sealed if _landed(backend, pack.rel)]
            raise
        published = sealed
        backend.sync()
    finally:
        for writer, pack in published:  # on disk: its numbers are taken for good
            writer.published(pack)
            reader.note_pack(writer.run_id, writer.stream, pack.first, pack.last)
        for writer in touched:
            writer.rollback()  # a no-op for the writers published above
    with index.write() as conn:
        for writer, step_rows in rows:
            num = Index.add_run(conn, writer.run_id, facts.get(writer.run_id))
            number = Index.set_stream(conn, num, writer.stream, writer.next_oid)
            Index.add_steps(conn, num, number, step_rows)
            Index.refresh_run(conn, num)
    for writer in touched:
        if compact_after is not None and writer.fresh >= compact_after:
            compact(backend, reader, writer.run_id, writer.stream, start=writer.fresh_start)
            writer.compacted()
