"""The index's SQL schema, and conversions between its rows and the store's records.

Steps are keyed by run and index and hold what listing, replay matching and ``verify`` need
without opening a pack: hashes (32-byte blobs), object numbers, ids, timing, outcome, model and
tokens. Run aggregates (step count, errors, tokens, bytes, models) are recomputed from the
steps by :data:`RUN_AGGREGATES` whenever a flush touches the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from otel_replay.store._types import RunInfo, StepInfo

__all__ = [
    "RUN_AGGREGATES",
    "RUN_COLUMNS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "STEP_COLUMNS",
    "UPDATE_RUN",
    "StepRef",
    "key_range",
    "run_info",
    "step_info",
    "step_row",
]

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE runs(
    num INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    start_ns INTEGER, end_ns INTEGER,
    span_error INTEGER NOT NULL DEFAULT 0,
    commit_sha TEXT, seed INTEGER,
    steps INTEGER NOT NULL DEFAULT 0, step_errors INTEGER NOT NULL DEFAULT 0,
    tokens_in INTEGER NOT NULL DEFAULT 0, tokens_out INTEGER NOT NULL DEFAULT 0,
    bytes INTEGER NOT NULL DEFAULT 0, models TEXT,
    pinned INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE streams(
    run INTEGER NOT NULL, id INTEGER NOT NULL, committed INTEGER NOT NULL,
    PRIMARY KEY(run, id)
) WITHOUT ROWID;
CREATE TABLE steps(
    key INTEGER PRIMARY KEY,
    stream INTEGER NOT NULL,
    kind TEXT NOT NULL, provider TEXT, model TEXT,
    req_hash BLOB NOT NULL, resp_hash BLOB,
    req_oid INTEGER NOT NULL, resp_oid INTEGER, rec_oid INTEGER NOT NULL,
    req_size INTEGER NOT NULL, resp_size INTEGER NOT NULL,
    trace_id BLOB NOT NULL, span_id BLOB NOT NULL,
    start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
    status_code INTEGER, error TEXT, complete INTEGER NOT NULL,
    tokens_in INTEGER, tokens_out INTEGER
);
"""
"""Runs are numbered; a step's key is ``run number << 32 | step index``, so the steps of a run
are one key range and steps, which are appended, fill whole pages (SQLite packs appended rows
of a rowid table densely, while a text-keyed table would keep its pages a third empty)."""

STEP_COLUMNS = (
    "key & 4294967295, stream, kind, provider, model, req_hash, resp_hash, req_oid, resp_oid, "
    "rec_oid, req_size, resp_size, trace_id, span_id, start_ns, end_ns, status_code, error, "
    "complete, tokens_in, tokens_out"
)

RUN_COLUMNS = (
    "id, start_ns, end_ns, span_error, commit_sha, seed, steps, step_errors, tokens_in, "
    "tokens_out, bytes, models, pinned"
)

RUN_AGGREGATES = """
SELECT count(*), count(error), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0),
       coalesce(sum(req_size + resp_size), 0), min(start_ns), max(end_ns),
       (SELECT group_concat(model, char(10)) FROM (
            SELECT model FROM steps WHERE key BETWEEN :lo AND :hi AND model IS NOT NULL
            GROUP BY model ORDER BY min(key)))
FROM steps WHERE key BETWEEN :lo AND :hi
"""
"""Aggregates of a run's steps (keys ``lo`` to ``hi``), recomputed when a flush touches it."""

UPDATE_RUN = """
UPDATE runs SET steps = :n, step_errors = :errors, tokens_in = :tin, tokens_out = :tout,
    bytes = :bytes, models = :models,
    start_ns = min(coalesce(start_ns, :first), coalesce(:first, start_ns)),
    end_ns = max(coalesce(end_ns, :last), coalesce(:last, end_ns))
WHERE num = :num
"""


def key_range(num: int) -> tuple[int, int]:
    """The first and last step key of run number ``num``."""
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


def _hash_text(digest: bytes | None) -> str | None:
    return None if digest is None else "sha256:" + digest.hex()


def step_info(run_id: str, row: Sequence[Any]) -> StepInfo:
    """A StepInfo from a row of :data:`STEP_COLUMNS`."""
    return StepInfo(
        run_id=run_id,
        index=row[0],
        kind=row[2],
        provider=row[3],
        model=row[4],
        request_hash=_hash_text(row[5]) or "",
        response_hash=_hash_text(row[6]),
        request_size=row[10],
        response_size=row[11],
        trace_id=int.from_bytes(row[12], "big"),
        span_id=int.from_bytes(row[13], "big"),
        start_ns=row[14],
        end_ns=row[15],
        status_code=row[16],
        error_type=row[17],
        complete=bool(row[18]),
        tokens_in=row[19],
        tokens_out=row[20],
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
        step_count=row[6],
        tokens_in=row[8],
        tokens_out=row[9],
        bytes=row[10],
        models=tuple(row[11].split("\n")) if row[11] else (),
        pinned=bool(row[12]),
    )


def step_row(stream: int, record_oid: int, entry: dict[str, Any]) -> tuple[Any, ...]:
    """The steps-table row of a record's step entry, led by its step index (the caller turns
    it into the key)."""
    response_hash = entry["response_hash"]
    return (
        entry["index"],
        stream,
        entry["kind"],
        entry["provider"],
        entry["model"],
        bytes.fromhex(entry["request_hash"].removeprefix("sha256:")),
        bytes.fromhex(response_hash.removeprefix("sha256:")) if response_hash else None,
        entry["request_oid"],
        entry["response_oid"],
        record_oid,
        entry["request_size"],
        entry["response_size"],
        bytes.fromhex(entry["trace_id"]),
        bytes.fromhex(entry["span_id"]),
        entry["start_ns"],
        entry["end_ns"],
        entry["status_code"],
        entry["error_type"],
        int(bool(entry["complete"])),
        entry["tokens_in"],
        entry["tokens_out"],
    )
