"""The index's SQL schema, and conversions between its rows and the store's records.

Steps are keyed by run and index and hold what listing, replay matching and ``verify`` need
without opening a pack: hashes (32-byte blobs), sizes, object numbers, ids, timing, outcome,
provider, model and tokens. The index is the only place that holds the hashes and sizes of the
bodies (the packs' records leave them out; a rebuild computes them from the bodies). Nothing
is stored twice: a step's stream is a small number within its run; its trace id, provider and
model are the run's unless they differ; its end is a duration. Run aggregates (step count,
errors, tokens, bytes, models) are recomputed from the steps by :data:`RUN_AGGREGATES` whenever
a flush touches the run.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from otel_replay.store._facts import NO_FACTS, StepFacts
from otel_replay.store._types import RunInfo, StepInfo

__all__ = [
    "KIND_CODES",
    "RUN_AGGREGATES",
    "RUN_COLUMNS",
    "RUN_SLOTS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "STEP_COLUMNS",
    "UPDATE_RUN",
    "Body",
    "RunBase",
    "StepRef",
    "Streams",
    "compact_ddl",
    "dump_streams",
    "key_range",
    "parse_streams",
    "run_base",
    "run_info",
    "run_slots",
    "step_info",
    "step_ref",
    "step_row",
    "stored_row",
]

SCHEMA_VERSION = 4

SCHEMA = """
CREATE TABLE runs(
    slot INTEGER PRIMARY KEY, id, num, start_ns, end_ns, span_error, commit_sha, seed,
    steps, step_errors, tokens_in, tokens_out, bytes, models, pinned, trace_id, provider, model,
    base_ns, streams
);
CREATE TABLE steps(
    key INTEGER PRIMARY KEY, stream, kind, provider, model, req_hash, resp_hash,
    req_oid, resp_delta, rec_delta, req_size, resp_size, trace_id, span_id, offset_ns, duration_ns,
    status_code, error, complete, tokens_in, tokens_out
);
"""
"""The tables, compact: an index of one 30-step run is 12 pages of 512 bytes (6 KB).

Columns carry no declared types and the file keeps the statements without the spaces around
their punctuation (``compact_ddl``): SQLite stores each value as given, and keeps the text of
each statement in the file's first pages, where 40 bytes more cost a page.

``runs``: ``slot`` is where the run's row is found from its id (:func:`run_slots`: a range
of 16 rowids given by the sha256 of the id, the row in the first free one), so looking a run
up by id is a rowid range search and needs no index of its own (a page, and 46 bytes of
schema that cost another); ``num`` numbers the run's steps (below), NULL while it has none;
``id`` text; times in Unix ns; ``span_error``, ``pinned`` 0/1; ``models`` newline-separated;
``trace_id`` (16 bytes) the trace of the run's first indexed step, ``provider`` and ``model``
the first a step of the run stated, ``base_ns`` the start of its first indexed step (each set
once, never changed);
``streams`` the run's streams as JSON, ``[[id, committed], ...]``: a stream's number within
its run is its position, a stream gone from the packs is ``null`` (the others keep their
numbers), and the objects below ``committed`` are durable and indexed. (A table of their own
would cost two pages in a small index: its own and one more for the schema.)

``steps``: ``stream`` is the stream's number; hashes are 32-byte blobs; ``kind`` is a
:data:`KIND_CODES` number (or the text of another kind); ``trace_id`` is NULL when it is the
run's; ``provider`` and ``model`` are NULL when they are the run's, ``''`` when the step has
none, else their text; ``offset_ns`` is its start minus the run's ``base_ns``, ``duration_ns``
its end minus its start; ``resp_delta`` and ``rec_delta`` are the object numbers of its
response and record minus ``req_oid``. SQLite stores integers in as few bytes as they need
(0 and 1, like NULL, in none), so the common step costs about 115 bytes and four fit a page.

A step's key is ``run num << 32 | step index``, so the steps of a run are one key range and
steps, which are appended, fill whole pages (SQLite packs appended rows of a rowid table
densely, while a text-keyed table would keep its pages a third empty). A run gets its
``num`` with its first steps, one more than the highest in use (``max(key) >> 32``, a
rowid lookup), and gives it back when its last steps go, so the numbers in use are always
those of the steps table. (``WITHOUT ROWID`` tables keyed by the run id would need no
``num`` or ``slot``, but hold at most 102 bytes of a row in a 512-byte page: every run row
and step row would spill into an overflow page of its own.)"""

RUN_SLOTS = 16
"""Rowids of ``runs`` a run id may sit at (:func:`run_slots`)."""


def run_slots(run_id: str) -> tuple[int, int]:
    """The first and last ``runs.slot`` the row of ``run_id`` may have: 16 rowids from 59
    bits of the sha256 of the id (two ids sharing them is a 1 in 2**59 chance, and 16 of them
    would have to)."""
    digest = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).digest()
    first = (int.from_bytes(digest[:8], "big") >> 5) * RUN_SLOTS
    return first, first + RUN_SLOTS - 1


def compact_ddl(statement: str) -> str:
    """``statement`` as the file keeps it: one line, no spaces around ``(``, ``)`` and ``,``."""
    return re.sub(r"\s*([(),])\s*", r"\1", " ".join(statement.split()))


KIND_CODES = {"llm": 0, "http": 1, "tool": 2}
"""Step kinds stored as numbers; any other kind is stored as its text."""
_KIND_NAMES = {code: name for name, code in KIND_CODES.items()}

STEP_COLUMNS = (
    "s.key & 4294967295, s.kind, "
    "CASE WHEN s.provider IS NULL THEN r.provider ELSE nullif(s.provider, '') END, "
    "CASE WHEN s.model IS NULL THEN r.model ELSE nullif(s.model, '') END, "
    "s.req_hash, s.resp_hash, s.req_size, "
    "s.resp_size, coalesce(s.trace_id, r.trace_id), s.span_id, r.base_ns + s.offset_ns, "
    "r.base_ns + s.offset_ns + s.duration_ns, s.status_code, s.error, s.complete, s.tokens_in, "
    "s.tokens_out"
)
"""Read ``FROM steps AS s JOIN runs AS r``."""

RUN_COLUMNS = (
    "id, start_ns, end_ns, span_error, commit_sha, seed, steps, step_errors, tokens_in, "
    "tokens_out, bytes, models, pinned"
)

RUN_AGGREGATES = """
SELECT count(*), count(error), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0),
       coalesce(sum(req_size + resp_size), 0), :base + min(offset_ns),
       :base + max(offset_ns + duration_ns),
       (SELECT group_concat(name, char(10)) FROM (
            SELECT CASE WHEN model IS NULL THEN :model ELSE nullif(model, '') END AS name
            FROM steps WHERE key BETWEEN :lo AND :hi AND name IS NOT NULL
            GROUP BY name ORDER BY min(key)))
FROM steps WHERE key BETWEEN :lo AND :hi
"""
"""Aggregates of a run's steps (keys ``lo`` to ``hi``; ``model`` and ``base`` the run's),
recomputed when a flush touches it."""

UPDATE_RUN = """
UPDATE runs SET steps = :n, step_errors = :errors, tokens_in = :tin, tokens_out = :tout,
    bytes = :bytes, models = :models,
    start_ns = min(coalesce(start_ns, :first), coalesce(:first, start_ns)),
    end_ns = max(coalesce(end_ns, :last), coalesce(:last, end_ns))
WHERE slot = :slot
"""


def key_range(num: int | None) -> tuple[int, int]:
    """The first and last step key of the run whose ``num`` is ``num`` (None: a run without
    steps, an empty range)."""
    if num is None:
        return 1, 0
    return num << 32, (num << 32) | 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class StepRef:
    """Where a step's bodies and record live: its stream and object numbers."""

    run_id: str
    index: int
    stream: int
    request_oid: int
    response_oid: int | None
    record_oid: int
    request_digest: bytes
    response_digest: bytes | None


RunBase = tuple[Any, ...]
"""What a run's steps are stored relative to: its ``trace_id``, ``provider``, ``model`` and
``base_ns`` (read in that order)."""

_BASE_COLUMNS = (11, 2, 3, 13)
"""Where :func:`step_row` puts the values a :data:`RunBase` is first set from."""


def run_base(known: RunBase, rows: Sequence[Sequence[Any]]) -> RunBase:
    """``known`` with each unset value taken from the first of ``rows`` (from
    :func:`step_row`) that has one."""
    return tuple(
        value if value is not None else next((r[at] for r in rows if r[at] is not None), None)
        for value, at in zip(known, _BASE_COLUMNS, strict=True)
    )


def _relative_name(value: str | None, runs: str | None) -> str | None:
    if value is None:
        return ""
    return None if value == runs else value


def stored_row(key: int, stream: int, row: Sequence[Any], base: RunBase) -> tuple[Any, ...]:
    """The steps-table row of a :func:`step_row` value, stored relative to its run's ``base``
    (see :data:`SCHEMA`)."""
    trace, provider, model, start = base
    request = row[6]
    return (
        key,
        stream,
        row[1],
        _relative_name(row[2], provider),
        _relative_name(row[3], model),
        row[4],
        row[5],
        request,
        None if row[7] is None else row[7] - request,
        row[8] - request,
        row[9],
        row[10],
        None if row[11] == trace else row[11],
        row[12],
        row[13] - start,
        *row[14:],
    )


Streams = list[list[int] | None]
"""A run's streams as ``runs.streams`` holds them: ``[id, committed]`` by number, or None."""


def parse_streams(text: str | None) -> Streams:
    """The streams of a ``runs.streams`` value."""
    streams: Streams = json.loads(text) if text else []
    return streams


def dump_streams(streams: Streams) -> str:
    """The ``runs.streams`` value of ``streams``."""
    return json.dumps(streams, separators=(",", ":"))


def step_ref(run_id: str, row: Sequence[Any], streams: Streams) -> StepRef:
    """A StepRef from a row of ``Index._REF`` (key, stream number, object numbers, hashes)
    and its run's parsed streams. A stream number the run does not list (damage) stands as
    ``-1 - number``."""
    number = row[1]
    entry = streams[number] if 0 <= number < len(streams) else None
    stream = entry[0] if entry is not None else -1 - number
    return StepRef(run_id, row[0] & 0xFFFFFFFF, stream, *row[2:])


def _hash_text(digest: bytes | None) -> str | None:
    return None if digest is None else "sha256:" + digest.hex()


def step_info(run_id: str, row: Sequence[Any]) -> StepInfo:
    """A StepInfo from a row of :data:`STEP_COLUMNS`."""
    kind = row[1]
    return StepInfo(
        run_id=run_id,
        index=row[0],
        kind=kind if isinstance(kind, str) else _KIND_NAMES.get(kind, str(kind)),
        provider=row[2],
        model=row[3],
        request_hash=_hash_text(row[4]) or "",
        response_hash=_hash_text(row[5]),
        request_size=row[6],
        response_size=row[7],
        trace_id=int.from_bytes(row[8] or b"", "big"),
        span_id=int.from_bytes(row[9], "big"),
        start_ns=row[10],
        end_ns=row[11],
        status_code=row[12],
        error_type=row[13],
        complete=bool(row[14]),
        tokens_in=row[15],
        tokens_out=row[16],
    )


def run_info(row: Sequence[Any]) -> RunInfo:
    """A RunInfo from a row of :data:`RUN_COLUMNS`."""
    return RunInfo(
        run_id=row[0],
        start_ns=row[1] or 0,
        end_ns=row[2] or 0,
        status="error" if row[3] or row[7] else "ok",
        commit=row[4],
        seed=row[5],
        step_count=row[6] or 0,
        tokens_in=row[8] or 0,
        tokens_out=row[9] or 0,
        bytes=row[10] or 0,
        models=tuple(row[11].split("\n")) if row[11] else (),
        pinned=bool(row[12]),
    )


Body = tuple[bytes, int]
"""A body as the index knows it: its sha256 digest and its size."""


class Timed(Protocol):
    """What :func:`step_row` reads of a step: a Fixture or a StoredStep."""

    @property
    def kind(self) -> str: ...
    @property
    def trace_id(self) -> int: ...
    @property
    def span_id(self) -> int: ...
    @property
    def start_ns(self) -> int: ...
    @property
    def end_ns(self) -> int: ...
    @property
    def status_code(self) -> int | None: ...
    @property
    def error_type(self) -> str | None: ...
    @property
    def complete(self) -> bool: ...


def step_row(
    record_oid: int,
    index: int,
    oids: tuple[int, int | None],
    step: Timed,
    facts: StepFacts | None,
    request: Body,
    response: Body | None,
) -> tuple[Any, ...]:
    """The steps-table values of step ``index`` of the record numbered ``record_oid``, led by
    its index (the index turns it into the key) and without its stream (the index adds its
    number). ``oids`` are its request's and response's object numbers, ``facts`` what its span
    says; ``response`` is None when none was received. Provider, model, trace id, start and
    object numbers are as given: :meth:`Index.add_steps` stores them relative to the run's
    (:func:`stored_row`)."""
    provider, model, tokens_in, tokens_out = facts or NO_FACTS
    return (
        index,
        KIND_CODES.get(step.kind, step.kind),
        provider,
        model,
        request[0],
        None if response is None else response[0],
        oids[0],
        oids[1],
        record_oid,
        request[1],
        0 if response is None else response[1],
        step.trace_id.to_bytes(16, "big"),
        step.span_id.to_bytes(8, "big"),
        step.start_ns,
        step.end_ns - step.start_ns,
        step.status_code,
        step.error_type,
        int(step.complete),
        tokens_in,
        tokens_out,
    )
