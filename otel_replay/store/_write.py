"""A flush: buffered steps, spans and run ends become one pack, records and index rows."""

from __future__ import annotations

import hashlib
import itertools
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import zstandard

from otel_replay._canonical import sha256_tag
from otel_replay.errors import StoreError
from otel_replay.step import RunEnd, RunFacts, Step
from otel_replay.store import _rows
from otel_replay.store._condemned import CONDEMNED_FILE, Condemned, read_condemned
from otel_replay.store._derived import Sources, derivable
from otel_replay.store._format import new_recording_id, pack_path, record_path
from otel_replay.store._fs import Backend
from otel_replay.store._index import Index
from otel_replay.store._lock import StoreLock
from otel_replay.store._objects import Batch, Bodies
from otel_replay.store._pack import SealedPack, frame_compressor
from otel_replay.store._records import (
    SPAN_STRING_MIN,
    RunEndFact,
    RunName,
    SpanStep,
    encode_record,
    frame_record,
    span_entry_json,
    span_step,
    step_entry,
    steps_without_bytes,
)
from otel_replay.store._segments import Previous, Recent, Shapes

__all__ = [
    "FLUSH_LEVEL",
    "EncodedSpan",
    "Pending",
    "Session",
    "checked",
    "encode_span",
    "prepare",
    "step_bodies",
]

FLUSH_LEVEL = 3
"""zstd level of the packs and records a flush writes: fast, so recording stays cheap; gc and
``compact`` recompress at a high level."""

_ATTEMPTS = 3
"""Remote stores: writes of one flush before giving up on a gc that keeps condemning what it
relies on (the caller then retries the batch later)."""

KNOWN_MAX = 1 << 17
"""Digests a session remembers as stored (committed by it, or found in the index), so most
of a conversation's history costs no index lookup."""


@dataclass(frozen=True, slots=True)
class SpanString:
    """A long string attribute of a span, stored as a body: its key, sha256 and UTF-8 bytes."""

    key: str
    digest: bytes
    data: bytes


@dataclass(frozen=True, slots=True)
class EncodedSpan:
    """A span as its run's record will keep it, encoded when it was put: the JSON of its
    record entry, the long string attributes that entry names by digest, and what it says
    of its step when it is a step's span."""

    run_id: str
    entry: bytes
    strings: list[SpanString]
    step: SpanStep | None = None


def encode_span(span: Mapping[str, Any], sources: Sources | None = None) -> EncodedSpan:
    """``span`` (a JSON-ready dict with a ``replay.run.id`` attribute) as its record keeps it.
    ValueError when the span has no run id or is not JSON-ready.

    ``sources`` are what the steps put with the span offer (bodies whose digests are known to
    be right, by ``sha256:<hex>``): attributes they rebuild byte for byte (its inline bodies,
    the codec's content attributes: ``_derived``) are left out and named. Other string
    attributes of :data:`SPAN_STRING_MIN` bytes or more become bodies, named by digest (stored
    as bodies, they are deduplicated). Either kind keeps its place in the attributes (a null
    stands in).

    Encoding it at once keeps the span as it was put, whatever its owner changes later.
    """
    attrs = span.get("attributes")
    run_id = attrs.get("replay.run.id") if isinstance(attrs, Mapping) else None
    if not (isinstance(run_id, str) and run_id):
        raise ValueError(f"span {span.get('name')!r} has no replay.run.id attribute")
    assert isinstance(attrs, Mapping)
    derivation = derivable(attrs, sources) if sources is not None else None
    kept = dict(attrs)
    if derivation is not None:
        for key in derivation.keys:
            kept[key] = None
    # UTF-8 takes at most 4 bytes a character: a shorter string is not long enough.
    long = [
        (key, value.encode("utf-8", "surrogatepass"))
        for key, value in kept.items()
        if isinstance(value, str) and len(value) >= SPAN_STRING_MIN // 4
    ]
    strings = [
        SpanString(key, hashlib.sha256(data).digest(), data)
        for key, data in long
        if len(data) >= SPAN_STRING_MIN
    ]
    for string in strings:
        kept[string.key] = None
    if strings or derivation is not None:
        span = {**span, "attributes": kept}
    try:
        entry = span_entry_json(
            span,
            {s.key: s.digest.hex() for s in strings},
            None if derivation is None else derivation.value(),
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"span {span.get('name')!r} is not JSON-ready: {exc}") from None
    return EncodedSpan(run_id, entry, strings, span_step(span))


def prepare(
    steps: Iterable[Step], spans: Iterable[Mapping[str, Any]]
) -> tuple[list[Step], list[EncodedSpan]]:
    """``steps`` checked (:func:`checked`) and ``spans`` encoded (:func:`encode_span`) with
    what those steps offer, as ``Store.put`` buffers them (one import there, not four per
    call); ValueError as they raise it."""
    accepted = [checked(step) for step in steps]
    sources = Sources.of(accepted, step_bodies(accepted))
    return accepted, [encode_span(span, sources) for span in spans]


def step_bodies(steps: Iterable[Step]) -> dict[str, bytes]:
    """The bodies of ``steps`` (checked) by their ``sha256:<hex>``."""
    bodies: dict[str, bytes] = {}
    for step in steps:
        bodies[step.request_hash] = step.request_body
        if step.response_hash is not None:
            bodies[step.response_hash] = step.response_body
    return bodies


def _check_hash(tag: str | None, body: bytes, what: str, step: Step) -> None:
    if tag != sha256_tag(body):
        raise ValueError(
            f"run {step.run_id!r} step {step.index}: {what} hash {tag!r} does not match the body"
        )


def checked(step: Step) -> Step:
    """``step``, after checking its hashes against its bodies: the store never files bytes
    under a hash they do not have. ValueError otherwise."""
    if not 0 <= step.index < 2**63:
        raise ValueError(f"run {step.run_id!r}: step index {step.index} is out of range")
    # Bodies the capture hashed (the very objects) are not hashed again.
    request, response = step.reading.hashed(step) if step.reading else (False, False)
    if not request:
        _check_hash(step.request_hash, step.request_body, "request", step)
    if step.response_hash is not None:
        if not response:
            _check_hash(step.response_hash, step.response_body, "response", step)
    elif step.response_body:
        raise ValueError(f"run {step.run_id!r} step {step.index}: a response without a hash")
    return step


@dataclass(slots=True)
class Pending:
    """What waits for the next flush: steps, spans (encoded), ends, facts and the bodies
    they reference, by run id."""

    steps: dict[str, list[Step]] = field(default_factory=dict)
    spans: dict[str, list[EncodedSpan]] = field(default_factory=dict)
    ends: dict[str, RunEnd] = field(default_factory=dict)
    facts: dict[str, RunFacts] = field(default_factory=dict)
    bodies: dict[str, Bodies] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.steps or self.spans or self.ends or self.facts)

    def add_step(self, step: Step) -> None:
        """A step (checked) and its bodies."""
        self.steps.setdefault(step.run_id, []).append(step)
        request = bytes.fromhex(step.request_hash[7:])
        bodies = self._bodies(step.run_id)
        bodies.add(step.request_body, request, (step.run_id, "request"))
        if step.response_hash is not None:
            bodies.add(step.response_body, bytes.fromhex(step.response_hash[7:]))

    def add_span(self, span: EncodedSpan) -> None:
        """A span's record entry and its long strings."""
        self.spans.setdefault(span.run_id, []).append(span)
        bodies = self._bodies(span.run_id)
        for string in span.strings:
            bodies.add(string.data, string.digest, (span.run_id, string.key))

    def _bodies(self, run_id: str) -> Bodies:
        bodies = self.bodies.get(run_id)
        if bodies is None:
            bodies = self.bodies[run_id] = Bodies()
        return bodies

    def all_bodies(self) -> Bodies:
        """Every body referenced, a run's together (related bodies side by side in the
        pack, where zstd finds what they share), runs in first-put order."""
        merged = Bodies()
        for run_id in self.runs():
            bodies = self.bodies.get(run_id)
            if bodies is not None:
                merged.update(bodies)
        return merged

    def runs(self) -> list[str]:
        """Every run id with something pending, in first-put order."""
        return list(dict.fromkeys([*self.steps, *self.spans, *self.ends, *self.facts]))

    def split(self) -> tuple[Pending, Pending] | None:
        """Two parts to write one after the other, about half of the steps and spans each,
        with their bodies: the first takes each run's earliest steps (and spans, taken
        alternately with them, as they were put), the second the rest and the runs' ends.
        None when there is a single step or span."""
        units: list[Step | EncodedSpan] = []
        for run_id in self.runs():
            steps, spans = self.steps.get(run_id, []), self.spans.get(run_id, [])
            for pair in itertools.zip_longest(steps, spans):
                units.extend(unit for unit in pair if unit is not None)
        if len(units) < 2:
            return None
        first, rest = Pending(facts=dict(self.facts)), Pending(ends=self.ends, facts=self.facts)
        for n, unit in enumerate(units):
            part = first if n < len(units) // 2 else rest
            if isinstance(unit, Step):
                part.add_step(unit)
            else:
                part.add_span(unit)
        return first, rest

    def merge_back(self, later: Pending) -> None:
        """Put ``later`` after what this holds (a failed flush keeps its batch)."""
        for run_id, steps in later.steps.items():
            self.steps.setdefault(run_id, []).extend(steps)
        for run_id, spans in later.spans.items():
            self.spans.setdefault(run_id, []).extend(spans)
        for run_id, bodies in later.bodies.items():
            self._bodies(run_id).update(bodies)
        self.ends.update(later.ends)
        self.facts.update(later.facts)


@dataclass(slots=True)
class _RunState:
    seq: int = 0
    facts: RunFacts | None = None
    facts_written: bool = False
    records: list[str] = field(default_factory=list)
    ended: bool = False
    name: RunName | None = None
    last_ns: int = 0
    """The latest end of a step written (the run's last activity)."""


@dataclass(slots=True)
class _RunPlan:
    """One run's part of a flush: its record file (path and bytes) and what to index."""

    run_id: str
    state: _RunState
    entries: list[dict[str, Any]]
    span_steps: list[SpanStep]
    end: RunEnd | None
    rel: str
    data: bytes


class Session:
    """One open store's writing side: its writer and recording ids, its runs' record
    numbers, the digests it knows are stored, and the packs it wrote (for ``close`` to merge).

    ``recording`` is the recording to write (default: a new one, under the writer's own id);
    ``inherited`` names runs of it that another writer began and ends, or that are to stay
    open (:meth:`unended` leaves them so).

    What the store already holds is reused, never stored again; in a remote store only from
    a pack that exists and is not condemned, checked again once the flush is published
    (:meth:`_still_usable`).

    Not thread-safe: the store calls it under its lock.
    """

    def __init__(
        self,
        backend: Backend,
        index: Index,
        lock: StoreLock,
        recording: str | None = None,
        inherited: Iterable[str] = (),
    ) -> None:
        self.writer = new_recording_id()
        self.recording = recording or self.writer
        self.inherited = set(inherited)
        self.backend = backend
        self.index = index
        self.lock = lock
        self.runs: dict[str, _RunState] = {}
        self.packs: list[str] = []
        self._known: dict[bytes, None] = {}
        # One compressor each for the flushes' packs and records (not thread-safe: the
        # session is used under the store's lock).
        self._packs_zstd = frame_compressor(FLUSH_LEVEL)
        self._records_zstd = zstandard.ZstdCompressor(level=FLUSH_LEVEL)
        self._shapes = Shapes()
        self._recent = Recent()
        self._previous = Previous()
        self._sweeps = 0
        self._usable: dict[str, bool] = {}
        """Remote stores: whether each pack asked about in this flush may be reused."""
        self._condemned: Condemned | None = None
        self._trusted: set[str] = set()
        """Remote stores: packs known to exist, and not to be condemned, as of the
        ``condemned`` file's version ``_version`` (any other version: none is)."""
        self._version: bytes | None = None

    def _exists(self, digests: Sequence[bytes]) -> set[bytes]:
        if not self.backend.local:
            return self._reusable(digests)
        held = {d for d in digests if d in self._known}
        unknown = [d for d in digests if d not in held]
        if unknown:
            with self.index.guard():
                held |= _rows.existing(self.index.conn(), unknown)
        return held

    def _reusable(self, digests: Sequence[bytes]) -> set[bytes]:
        """Remote stores: those of ``digests`` stored in a pack this flush may rely on."""
        with self.index.guard():
            found = _rows.packs_of(self.index.conn(), digests)
        condemned = self._condemned
        for pack in set(found.values()) - set(self._usable):
            self._usable[pack] = (
                condemned is not None
                and pack not in condemned.packs
                and (pack in self._trusted or self.backend.exists(pack_path(pack)))
            )
            if self._usable[pack]:
                self._trusted.add(pack)
        return {digest for digest, pack in found.items() if self._usable[pack]}

    def _remember(self, digests: Sequence[bytes]) -> None:
        known = self._known
        known.update(dict.fromkeys(digests))
        if len(known) > KNOWN_MAX:  # the first remembered are forgotten first
            for digest in list(itertools.islice(known, len(known) - KNOWN_MAX)):
                del known[digest]

    def unended(self, pending: Pending) -> list[RunEnd]:
        """An end for every run written or pending that was not ended (but the inherited
        ones, which their own writer ends): at its last step's end (the run's last activity),
        else now."""
        now = time.time_ns()
        ends = []
        for run_id in dict.fromkeys([*self.runs, *pending.runs()]):
            state = self.runs.get(run_id)
            if run_id in pending.ends or (state is not None and state.ended):
                continue
            if run_id in self.inherited:
                continue
            last = max([s.end_ns for s in pending.steps.get(run_id, [])], default=0)
            last = max(last, state.last_ns if state is not None else 0)
            ends.append(RunEnd(run_id, last or now))
        return ends

    def forget_known(self) -> None:
        """Forget what is stored (gc may have removed it)."""
        self._known.clear()

    def _plan(self, pending: Pending) -> list[_RunPlan]:
        """What the flush writes for each run."""
        plans = []
        for run_id in pending.runs():
            steps = pending.steps.get(run_id, [])
            state = self.runs.setdefault(run_id, _RunState())
            given = pending.facts.get(run_id)
            if given is not None and given is not state.facts:
                state.facts, state.facts_written = given, False
            for step in steps:
                state.last_ns = max(state.last_ns, step.end_ns)
                if step.run is not None and step.run is not state.facts:
                    state.facts, state.facts_written = step.run, False
            end = pending.ends.get(run_id)
            entries = [step_entry(step) for step in steps]
            spans = pending.spans.get(run_id, [])
            record = encode_record(
                run_id,
                self.recording,
                state.seq,
                facts=None if state.facts_written else state.facts,
                steps=entries,
                spans=[span.entry for span in spans],
                end=None if end is None else RunEndFact(end.end_ns, end.error_type),
                name=state.name,
            )
            rel = record_path(run_id, self.writer, state.seq, state.seq)
            plans.append(
                _RunPlan(
                    run_id,
                    state,
                    entries,
                    steps_without_bytes((span.step for span in spans), entries),
                    end,
                    rel,
                    frame_record(record, self._records_zstd),
                )
            )
        return plans

    def _name_new_runs(self, pending: Pending) -> None:
        """Give each run this recording has not flushed yet its name in the index, before
        its first record is written: the records carry it, so a rebuild restores it."""
        new = [r for r in pending.runs() if r not in self.runs or self.runs[r].name is None]
        if not new:
            return
        with self.index.transaction() as tx:
            for run_id in new:
                row = _rows.ensure_run(tx.conn, run_id, self.recording, None, self.backend.location)
                self.runs.setdefault(run_id, _RunState()).name = RunName(row.name, row.number)

    def write(self, pending: Pending) -> None:
        """Write one flush (see the module docstring); StoreError on I/O failure, with
        nothing indexed (the caller keeps the batch and may retry it)."""
        self._name_new_runs(pending)
        plans = self._plan(pending)
        with self.lock.shared():
            with self.index.guard():
                sweeps = _rows.sweeps(self.index.conn())
            if sweeps != self._sweeps:  # gc removed objects: what was known may be gone
                self._known.clear()
                self._sweeps = sweeps
            bodies = pending.all_bodies()
            for _ in range(_ATTEMPTS):
                if not self.backend.local:
                    self._begin_remote()
                batch = Batch(self._shapes, self._recent, self._previous)
                batch.resolve(bodies, self._exists)
                pack = batch.pack.seal(self._packs_zstd) if batch.pack.count else None
                files = [(plan.rel, plan.data) for plan in plans]
                if pack is not None:
                    files.insert(0, (pack_path(pack.name), pack.data))
                self.backend.publish_many(files)
                self.backend.sync()
                if self.backend.local or self._still_usable(pack):
                    break
            else:
                raise StoreError(
                    f"cannot write {self.backend.location}: a gc condemned what each of "
                    f"{_ATTEMPTS} attempts to write a flush relied on"
                )
            with self.index.transaction() as tx:
                if pack is not None:
                    # An object stored again because its pack was condemned or gone (remote
                    # stores) is located in this pack from now on.
                    move = not self.backend.local
                    _rows.add_pack(tx.conn, pack.name, len(pack.data), pack.table, move=move)
                for plan in plans:
                    self._index_plan(tx.conn, plan)
            # Only now is a record's number taken: a flush that failed before its commit is
            # retried under the same names, so its files are replaced, never left beside
            # the retry's with the same steps and spans.
            for plan in plans:
                plan.state.seq += 1
                plan.state.records.append(plan.rel)
                plan.state.facts_written = plan.state.facts is not None
                plan.state.ended = plan.state.ended or plan.end is not None
        if pack is not None:
            self.packs.append(pack.name)
            self._remember(pack.digests())
        self._remember(list(bodies.data))

    def _begin_remote(self) -> None:
        """Remote stores, before a flush decides what to reuse: read ``condemned``; when a
        gc wrote it since the packs were checked, trust none of them unchecked."""
        self._usable = {}
        self._condemned = read_condemned(self.backend)
        version = None if self._condemned is None else self._condemned.version
        if version is None or version != self._version:
            self._trusted.clear()
        self._version = version

    def _still_usable(self, pack: SealedPack | None) -> bool:
        """Remote stores, once a flush's files are published: whether every pack it relies
        on (those it reuses objects of, and its own) is still neither condemned nor gone.

        This closes the race with gc. gc deletes a pack only when it was in ``condemned``
        before gc listed the record files, and found no record referencing it. A pack not
        condemned when the flush began and condemned or gone now makes the flush write
        again (storing those objects anew). Otherwise, had a gc deleted it or were one to,
        it was condemned after this check, so that gc listed the records after this flush's
        were published, and found them. No clock is compared, however long the flush took.
        When no gc wrote the list meanwhile (the same bytes), nothing was condemned or
        deleted: nothing is asked of the store but the list.
        """
        relied = [name for name, usable in self._usable.items() if usable]
        if pack is not None:
            relied.append(pack.name)
        if not relied:
            return True
        now = read_condemned(self.backend)
        if now is None:
            raise StoreError(f"cannot read {self.backend.location}/{CONDEMNED_FILE}")
        if now.version != self._version:
            if any(name in now.packs for name in relied) or not all(
                self.backend.exists(pack_path(name)) for name in relied
            ):
                return False
            self._trusted, self._version = set(relied), now.version
        if pack is not None:
            self._trusted.add(pack.name)
        return True

    def _index_plan(self, conn: sqlite3.Connection, plan: _RunPlan) -> None:
        state = plan.state
        facts = None if state.facts_written else state.facts
        row = _rows.ensure_run(
            conn, plan.run_id, self.recording, facts, self.backend.location, state.name
        )
        record = _rows.add_record(conn, plan.rel, row.id, len(plan.data))
        _rows.add_steps(conn, row.id, record, plan.entries)
        _rows.add_span_steps(conn, row.id, record, plan.span_steps)
        if plan.end is not None:
            _rows.end_run(conn, row.id, plan.end.end_ns, plan.end.error_type)
