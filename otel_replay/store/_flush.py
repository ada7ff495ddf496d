"""A flush: buffered fixtures and spans become packs, then index rows, durably.

Order matters for crash safety. Per run touched, the new objects (deduplicated against the
stream) and one record go into one pack; every pack is written to a temporary file, fsynced
and renamed into place, and the directories are fsynced once each; only then does one SQLite
transaction add the steps. A process killed before the commit leaves packs no index row points
at (``gc`` removes them), never an index row pointing at a missing or partial pack.
"""

from __future__ import annotations

import hashlib
import secrets
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from otel_replay.capture._handoff import Fixture
from otel_replay.store._fs import Backend
from otel_replay.store._index import Index
from otel_replay.store._reader import Reader
from otel_replay.store._records import (
    encode_record,
    externalize,
    span_facts,
    span_run_id,
    step_entry,
)
from otel_replay.store._rows import step_row
from otel_replay.store._stream import SealedPack, StreamWriter, compact

__all__ = ["Pending", "checked", "write"]

Pending = tuple[Fixture, bytes, bytes | None]
"""A fixture with the sha256 digests of its request and response bodies (None: no response)."""


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
            if done.fresh:
                compact(backend, reader, done.run_id, done.stream)
    writers.move_to_end(run_id)
    return writer


def _encode_run(
    writer: StreamWriter,
    items: list[Pending],
    spans: list[Mapping[str, Any]],
    facts: Any,
) -> list[tuple[Any, ...]]:
    """Add one run's bodies, spans and record to its stream; the index rows of its steps."""
    entries = []
    for fx, request, response in items:
        request_oid = writer.put(fx.request_body, request)
        response_oid = None if response is None else writer.put(fx.response_body, response)
        step_facts = facts.steps.get(fx.step_index) if facts is not None else None
        entries.append(step_entry(fx, request_oid, response_oid, step_facts))
    stored, ext = [], []
    for position, span in enumerate(spans):
        copy, found = externalize(span, position, writer.put)
        stored.append(copy)
        ext.extend(found)
    record = writer.add_record(encode_record(writer.run_id, entries, stored, ext))
    return [step_row(writer.stream, record, entry) for entry in entries]


def write(
    backend: Backend,
    index: Index,
    reader: Reader,
    writers: OrderedDict[str, StreamWriter],
    pending: list[Pending],
    spans: list[dict[str, Any]],
    *,
    compact_after: int | None,
) -> None:
    """Write one flush (see the module docstring); raises StoreError on I/O failure.

    Objects of packs that were never published are forgotten again; published ones stay
    (they are durable) and the caller may retry the same batch.
    """
    facts = span_facts(spans)
    groups: dict[str, tuple[list[Pending], list[Mapping[str, Any]]]] = {}
    for item in pending:
        groups.setdefault(item[0].run_id, ([], []))[0].append(item)
    for span in spans:
        groups.setdefault(span_run_id(span) or "", ([], []))[1].append(span)
    touched = [_writer(backend, reader, writers, run_id) for run_id in groups]
    rows: list[tuple[StreamWriter, list[tuple[Any, ...]]]] = []
    published: list[tuple[StreamWriter, SealedPack]] = []
    try:
        for writer, (items, run_spans) in zip(touched, groups.values(), strict=True):
            rows.append((writer, _encode_run(writer, items, run_spans, facts.get(writer.run_id))))
        for writer in touched:
            if writer.has_pending:
                pack = writer.seal()
                # The stream is this writer's alone and its numbers only grow: the name is new.
                backend.publish(pack.rel, pack.data)
                published.append((writer, pack))
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
            Index.set_stream(conn, num, writer.stream, writer.next_oid)
            Index.add_steps(conn, num, step_rows)
            Index.refresh_run(conn, num)
    for writer in touched:
        if compact_after is not None and writer.fresh >= compact_after:
            compact(backend, reader, writer.run_id, writer.stream, start=writer.fresh_start)
            writer.compacted()
