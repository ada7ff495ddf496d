"""Flush records: the steps and spans of one run written by one flush, as JSON.

A record is what makes the packs self-describing: it holds, for each step, everything of the
capture's :class:`~otel_replay.capture._handoff.Fixture` but the bodies (those are objects of
the stream, referenced by number), plus the spans handed over with it. The index is rebuilt
from records alone.

Spans are stored as given, except that long strings (:data:`EXTERNAL_MIN` characters or more)
anywhere in a span are moved into objects of the stream and replaced by ``null`` plus an
entry in ``ext``. Those strings are the expensive part of a span: the inline request body
(the same bytes as the stored body, so it costs nothing) and ``gen_ai.input.messages``, which
re-sends the whole history on every step and is split like a body. Reading restores them.

Also here: pure functions that derive run and step facts (status, tokens, model, commit,
seed) from fixtures and spans.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from otel_replay.capture._handoff import Fixture

__all__ = [
    "EXTERNAL_MIN",
    "Record",
    "RunFacts",
    "StepFacts",
    "attribute",
    "decode_record",
    "encode_record",
    "externalize",
    "fixture_from_entry",
    "restore",
    "span_facts",
    "step_entry",
]

EXTERNAL_MIN = 512
"""Span strings at least this long are stored as objects (deduplicated) instead of inline."""

RECORD_VERSION = 1

Path = list[str | int]


def attribute(span: Mapping[str, Any], key: str) -> Any:
    """The value of attribute ``key`` of a span dict, or None.

    Accepts ``attributes`` as a plain mapping or as an OTLP JSON list of ``{key, value}``.
    """
    attrs = span.get("attributes")
    if isinstance(attrs, Mapping):
        return attrs.get(key)
    if isinstance(attrs, list):
        for item in attrs:
            if isinstance(item, Mapping) and item.get("key") == key:
                value = item.get("value")
                if isinstance(value, Mapping) and len(value) == 1:
                    inner = next(iter(value.values()))
                    return int(inner) if "intValue" in value else inner
                return value
    return None


def _first(span: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if span.get(key) is not None:
            return span[key]
    return None


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def _is_error(span: Mapping[str, Any]) -> bool:
    status = span.get("status")
    code = status.get("code", status.get("status_code")) if isinstance(status, Mapping) else status
    return str(code).upper() in ("ERROR", "STATUS_CODE_ERROR", "2", "STATUSCODE.ERROR")


@dataclass(slots=True)
class StepFacts:
    """What a step's span says about it."""

    provider: str | None = None
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None


@dataclass(slots=True)
class RunFacts:
    """What a run's spans say about it."""

    start_ns: int | None = None
    end_ns: int | None = None
    error: bool = False
    commit: str | None = None
    seed: int | None = None
    steps: dict[int, StepFacts] = field(default_factory=dict)


def span_run_id(span: Mapping[str, Any]) -> str | None:
    """The ``replay.run.id`` of a span dict, or None."""
    run_id = attribute(span, "replay.run.id")
    return run_id if isinstance(run_id, str) and run_id else None


def span_facts(spans: Iterable[Mapping[str, Any]]) -> dict[str, RunFacts]:
    """Facts per run id from span dicts (spans without ``replay.run.id`` are skipped).

    A run is in error when any of its spans has an error status; provider, model and token
    counts of step *i* come from the span with ``replay.step.index`` *i*.
    """
    facts: dict[str, RunFacts] = {}
    for span in spans:
        run_id = span_run_id(span)
        if run_id is None:
            continue
        run = facts.setdefault(run_id, RunFacts())
        start = _int(_first(span, "start_ns", "start_time_unix_nano", "startTimeUnixNano"))
        end = _int(_first(span, "end_ns", "end_time_unix_nano", "endTimeUnixNano"))
        if start is not None:
            run.start_ns = start if run.start_ns is None else min(run.start_ns, start)
        if end is not None:
            run.end_ns = end if run.end_ns is None else max(run.end_ns, end)
        run.error = run.error or _is_error(span)
        commit = attribute(span, "vcs.ref.head.revision")
        if isinstance(commit, str) and commit:
            run.commit = commit
        seed = _int(attribute(span, "replay.seed"))
        if seed is not None:
            run.seed = seed
        index = _int(attribute(span, "replay.step.index"))
        if index is not None:
            step = run.steps.setdefault(index, StepFacts())
            provider = attribute(span, "gen_ai.provider.name")
            model = attribute(span, "gen_ai.request.model") or attribute(
                span, "gen_ai.response.model"
            )
            tokens_in = _int(attribute(span, "gen_ai.usage.input_tokens"))
            tokens_out = _int(attribute(span, "gen_ai.usage.output_tokens"))
            if isinstance(provider, str):
                step.provider = provider
            if isinstance(model, str):
                step.model = model
            if tokens_in is not None:
                step.tokens_in = tokens_in
            if tokens_out is not None:
                step.tokens_out = tokens_out
    return facts


def step_entry(
    fixture: Fixture, request_oid: int, response_oid: int | None, facts: StepFacts | None
) -> dict[str, Any]:
    """The record entry of one step: the fixture without its bodies, plus object numbers."""
    facts = facts or StepFacts()
    return {
        "index": fixture.step_index,
        "kind": fixture.kind,
        "method": fixture.method,
        "url": fixture.url,
        "request_headers": fixture.request_headers,
        "request_hash": fixture.request_hash,
        "request_oid": request_oid,
        "request_size": len(fixture.request_body),
        "status_code": fixture.status_code,
        "response_headers": fixture.response_headers,
        "response_hash": fixture.response_hash,
        "response_oid": response_oid,
        "response_size": len(fixture.response_body),
        "chunks": fixture.chunks,
        "complete": fixture.complete,
        "error_type": fixture.error_type,
        "start_ns": fixture.start_ns,
        "end_ns": fixture.end_ns,
        "trace_id": f"{fixture.trace_id:032x}",
        "span_id": f"{fixture.span_id:016x}",
        "provider": facts.provider,
        "model": facts.model,
        "tokens_in": facts.tokens_in,
        "tokens_out": facts.tokens_out,
    }


def fixture_from_entry(
    run_id: str, entry: Mapping[str, Any], request: bytes, response: bytes
) -> Fixture:
    """Rebuild the capture's Fixture from a record entry and its verified bodies."""
    return Fixture(
        run_id=run_id,
        step_index=entry["index"],
        trace_id=int(entry["trace_id"], 16),
        span_id=int(entry["span_id"], 16),
        kind=entry["kind"],
        method=entry["method"],
        url=entry["url"],
        request_headers=[(k, v) for k, v in entry["request_headers"]],
        request_body=request,
        request_hash=entry["request_hash"],
        status_code=entry["status_code"],
        response_headers=[(k, v) for k, v in entry["response_headers"]],
        response_body=response,
        response_hash=entry["response_hash"],
        chunks=[(size, ns) for size, ns in entry["chunks"]],
        complete=entry["complete"],
        error_type=entry["error_type"],
        start_ns=entry["start_ns"],
        end_ns=entry["end_ns"],
    )


def externalize(
    span: Mapping[str, Any], position: int, put: Callable[[bytes], int]
) -> tuple[dict[str, Any], list[list[Any]]]:
    """A copy of ``span`` with long strings replaced by None, and their ``ext`` entries
    ``[position, path, object number, fingerprint]``; ``put`` stores bytes, returns a number."""
    ext: list[list[Any]] = []

    def walk(value: Any, path: Path) -> Any:
        if isinstance(value, str) and len(value) >= EXTERNAL_MIN:
            try:
                data = value.encode()
            except UnicodeEncodeError:
                return value  # lone surrogates: left inline (and refused by the encoder)
            ext.append([position, path, put(data), hashlib.sha256(data).hexdigest()[:16]])
            return None
        if isinstance(value, Mapping):
            return {key: walk(item, [*path, key]) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [walk(item, [*path, i]) for i, item in enumerate(value)]
        return value

    return walk(span, []), ext


def restore(
    spans: list[dict[str, Any]], ext: Iterable[list[Any]], get: Callable[[int], bytes]
) -> list[dict[str, Any]]:
    """Put the externalized strings back into ``spans`` (in place; also returned).

    Raises ValueError when a restored string does not match its fingerprint.
    """
    for position, path, oid, fingerprint in ext:
        data = get(oid)
        if hashlib.sha256(data).hexdigest()[:16] != fingerprint:
            raise ValueError(f"span string (object {oid}) does not match its fingerprint")
        target: Any = spans[position]
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = data.decode()
    return spans


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded flush record."""

    run_id: str
    steps: list[dict[str, Any]]
    spans: list[dict[str, Any]]
    ext: list[list[Any]]


def encode_record(
    run_id: str, steps: list[dict[str, Any]], spans: list[dict[str, Any]], ext: list[list[Any]]
) -> bytes:
    """The JSON bytes of a record."""
    return orjson.dumps(
        {"v": RECORD_VERSION, "run": run_id, "steps": steps, "spans": spans, "ext": ext}
    )


def decode_record(data: bytes) -> Record:
    """Decode record bytes; ValueError when they are not a record this version reads."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"record is not JSON: {exc}") from None
    if not isinstance(value, dict) or value.get("v") != RECORD_VERSION:
        raise ValueError("record has an unknown version")
    run_id, steps, spans, ext = (value.get(k) for k in ("run", "steps", "spans", "ext"))
    if not (isinstance(run_id, str) and isinstance(steps, list) and isinstance(spans, list)):
        raise ValueError("record is missing its run, steps or spans")
    return Record(run_id, steps, spans, ext if isinstance(ext, list) else [])
