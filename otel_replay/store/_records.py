"""Flush records: the steps and spans of one run written by one flush, as JSON.

A record is what makes the packs self-describing: it holds, for each step, everything of the
capture's :class:`~otel_replay.capture._handoff.Fixture` but the bodies (those are objects of
the stream, referenced by number), plus the spans handed over with it. The index is rebuilt
from records alone.

Spans are stored as given, except that long strings (:data:`EXTERNAL_MIN` characters or more)
anywhere in a span are moved into objects of the stream and replaced by ``null`` plus an
entry in ``ext`` (its path, its object, the first 8 bytes of its sha256). Those strings are
the expensive part of a span: the inline request body (the same bytes as the stored body, so
it costs nothing) and ``gen_ai.input.messages``, which re-sends the whole history on every
step and is split like a body. Reading restores them. ``Store.put`` turns a span into its
record form at once (:func:`prepare_span`: JSON bytes and the strings), which checks it and
keeps nothing the caller can still change.

A step is stored without what its other fields already say (:func:`compact_step`): absent
facts and errors, ``complete`` when true, a ``content-length`` header equal to the body's size,
the single chunk of a response read in one piece, the end as a duration. Decoding puts them
back, so a decoded record's steps hold every field :func:`step_entry` wrote.

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
    "PreparedSpan",
    "Record",
    "RunFacts",
    "SpanFacts",
    "StepFacts",
    "attribute",
    "compact_step",
    "decode_record",
    "encode_record",
    "expand_step",
    "ext_entries",
    "facts_of",
    "fixture_from_entry",
    "merge_facts",
    "prepare_span",
    "restore",
    "span_facts",
    "step_entry",
    "strip_strings",
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
    if type(attrs) is dict or isinstance(attrs, Mapping):
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


StepFacts = tuple[str | None, str | None, int | None, int | None]
"""What a step's span says about it: provider, model, tokens in and out (a plain tuple, which
the garbage collector stops tracking)."""

_NO_FACTS: StepFacts = (None, None, None, None)


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


SpanFacts = tuple[
    int | None,
    int | None,
    bool,
    str | None,
    int | None,
    int | None,
    str | None,
    str | None,
    int | None,
    int | None,
]
"""What one span says: start, end, error, commit, seed, step index, provider, model, tokens in
and out (a tuple of plain values, cheap to keep until the flush)."""


def facts_of(span: Mapping[str, Any]) -> SpanFacts:
    """The facts one span dict states (see :func:`span_facts`)."""
    commit = attribute(span, "vcs.ref.head.revision")
    index = _int(attribute(span, "replay.step.index"))
    provider = model = tokens_in = tokens_out = None
    if index is not None:
        provider = _str(attribute(span, "gen_ai.provider.name"))
        model = _str(
            attribute(span, "gen_ai.request.model") or attribute(span, "gen_ai.response.model")
        )
        tokens_in = _int(attribute(span, "gen_ai.usage.input_tokens"))
        tokens_out = _int(attribute(span, "gen_ai.usage.output_tokens"))
    return (
        _int(_first(span, "start_ns", "start_time_unix_nano", "startTimeUnixNano")),
        _int(_first(span, "end_ns", "end_time_unix_nano", "endTimeUnixNano")),
        _is_error(span),
        commit if isinstance(commit, str) and commit else None,
        _int(attribute(span, "replay.seed")),
        index,
        provider,
        model,
        tokens_in,
        tokens_out,
    )


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def merge_facts(items: Iterable[tuple[str, SpanFacts]]) -> dict[str, RunFacts]:
    """Facts per run id from ``(run id, facts of one span)`` pairs."""
    facts: dict[str, RunFacts] = {}
    for run_id, (start, end, error, commit, seed, index, provider, model, t_in, t_out) in items:
        run = facts.get(run_id)
        if run is None:
            run = facts[run_id] = RunFacts()
        if start is not None:
            run.start_ns = start if run.start_ns is None else min(run.start_ns, start)
        if end is not None:
            run.end_ns = end if run.end_ns is None else max(run.end_ns, end)
        run.error = run.error or error
        if commit is not None:
            run.commit = commit
        if seed is not None:
            run.seed = seed
        if index is not None:
            old = run.steps.get(index, _NO_FACTS)
            run.steps[index] = (
                provider if provider is not None else old[0],
                model if model is not None else old[1],
                t_in if t_in is not None else old[2],
                t_out if t_out is not None else old[3],
            )
    return facts


def span_facts(spans: Iterable[Mapping[str, Any]]) -> dict[str, RunFacts]:
    """Facts per run id from span dicts (spans without ``replay.run.id`` are skipped).

    A run is in error when any of its spans has an error status; provider, model and token
    counts of step *i* come from the span with ``replay.step.index`` *i*.
    """
    return merge_facts(
        (run_id, facts_of(span)) for span in spans if (run_id := span_run_id(span)) is not None
    )


def step_entry(
    fixture: Fixture, request_oid: int, response_oid: int | None, facts: StepFacts | None
) -> dict[str, Any]:
    """The record entry of one step: the fixture without its bodies, plus object numbers."""
    provider, model, tokens_in, tokens_out = facts or _NO_FACTS
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
        "provider": provider,
        "model": model,
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
    }


_ABSENT_WHEN_NONE = ("provider", "model", "tokens_in", "tokens_out", "error_type")


def _lengths_out(headers: Any, size: int) -> Any:
    """Headers with a ``content-length`` equal to ``size`` as None (its value is implied)."""
    text = str(size)
    if not any(v == text and k.lower() == "content-length" for k, v in headers):
        return headers
    return [[k, None if v == text and k.lower() == "content-length" else v] for k, v in headers]


def _lengths_in(headers: list[list[Any]], size: int) -> list[list[Any]]:
    return [[k, str(size) if v is None else v] for k, v in headers]


def compact_step(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A step entry as a record stores it: without what its other fields already say (see
    the module docstring); :func:`expand_step` is its inverse."""
    out = dict(entry)
    for key in _ABSENT_WHEN_NONE:
        if out[key] is None:
            del out[key]
    if out["complete"] is True:
        del out["complete"]
    duration = out.pop("end_ns") - out["start_ns"]
    out["duration_ns"] = duration
    size = out["response_size"]
    chunks = out["chunks"]
    if len(chunks) == 1 and tuple(chunks[0]) == (size, duration):
        del out["chunks"]
    out["request_headers"] = _lengths_out(out["request_headers"], out["request_size"])
    out["response_headers"] = _lengths_out(out["response_headers"], size)
    return out


def expand_step(stored: Mapping[str, Any]) -> dict[str, Any]:
    """The step entry :func:`compact_step` was given. KeyError or TypeError when a field
    is missing or malformed."""
    entry = dict(stored)
    for key in _ABSENT_WHEN_NONE:
        entry.setdefault(key, None)
    entry.setdefault("complete", True)
    duration = entry.pop("duration_ns")
    entry["end_ns"] = entry["start_ns"] + duration
    entry.setdefault("chunks", [[entry["response_size"], duration]])
    entry["request_headers"] = _lengths_in(entry["request_headers"], entry["request_size"])
    entry["response_headers"] = _lengths_in(entry["response_headers"], entry["response_size"])
    return entry


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


Stripped = tuple[Mapping[str, Any], list[tuple[Path, str]]]
"""A span with its long strings replaced by None, and those strings with their paths."""


def strip_strings(span: Mapping[str, Any]) -> Stripped:
    """``span`` with every string of :data:`EXTERNAL_MIN` characters or more replaced by None,
    and the paths and values of those strings (in walk order).

    Only the containers on the way to such a string are copied; the others are the caller's
    own, so serialise the result before the caller can change them (as
    :func:`prepare_span` does). A string that cannot be encoded as UTF-8 (lone surrogates)
    is left inline, where the JSON encoder refuses it. (An ASCII string is known to be fine
    without looking at it.)
    """
    found: list[tuple[Path, str]] = []
    path: Path = []

    def long_string(value: str) -> bool:
        if len(value) < EXTERNAL_MIN:
            return False
        if not value.isascii():
            try:
                value.encode()
            except UnicodeEncodeError:
                return False
        found.append((list(path), str(value)))
        return True

    def walk(value: Any) -> Any:
        """``value`` itself, or a copy when a long string is inside."""
        if isinstance(value, str):
            return None if long_string(value) else value
        if isinstance(value, Mapping):
            copy: dict[Any, Any] | None = None
            for key, item in value.items():
                kind = type(item)
                if kind in _PLAIN or (kind is str and len(item) < EXTERNAL_MIN):
                    continue
                path.append(key)
                new = walk(item)
                path.pop()
                if new is not item:
                    if copy is None:
                        copy = dict(value)
                    copy[key] = new
            return copy if copy is not None else value
        if isinstance(value, list | tuple):
            items: list[Any] | None = None
            for position, item in enumerate(value):
                if type(item) in _PLAIN:
                    continue
                path.append(position)
                new = walk(item)
                path.pop()
                if new is not item:
                    if items is None:
                        items = list(value)
                    items[position] = new
            return items if items is not None else value
        return value

    skeleton = walk(span)
    return skeleton, found


_PLAIN = frozenset({int, float, bool, type(None)})


PreparedSpan = tuple[bytes, tuple[bytes | str, ...]]
"""A span ready for its record: its JSON with the long strings taken out (see
:func:`strip_strings`), and those strings after their paths (JSON), in one flat tuple."""


def prepare_span(span: Mapping[str, Any]) -> PreparedSpan:
    """A span as its record will hold it, checked: TypeError when it is not JSON-ready.

    Only bytes and strings are kept (no containers, which would live until the flush and
    weigh on the garbage collector).
    """
    skeleton, strings = strip_strings(span)
    flat: list[bytes | str] = []
    for path, value in strings:
        flat += (orjson.dumps(path), value)
    return orjson.dumps(skeleton), tuple(flat)


def ext_entries(
    position: int,
    strings: tuple[bytes | str, ...],
    put: Callable[..., tuple[int, bytes]],
    *,
    segment: bool = True,
) -> list[list[Any]]:
    """Store the strings :func:`prepare_span` took out of span ``position`` with
    ``put(data, segment=segment)``, which returns their object number and sha256; their
    ``ext`` entries ``[position, path, object number, fingerprint]``."""
    entries: list[list[Any]] = []
    for at in range(0, len(strings), 2):
        path, value = strings[at], strings[at + 1]
        assert isinstance(path, bytes) and isinstance(value, str)
        oid, digest = put(value.encode(), segment=segment)
        entries.append([position, orjson.Fragment(path), oid, digest[:8].hex()])
    return entries


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
    run_id: str, steps: list[dict[str, Any]], spans: list[bytes], ext: list[list[Any]]
) -> bytes:
    """The JSON bytes of a record; ``spans`` are already JSON (see :func:`prepare_span`)."""
    return orjson.dumps(
        {
            "v": RECORD_VERSION,
            "run": run_id,
            "steps": [compact_step(step) for step in steps],
            "spans": [orjson.Fragment(span) for span in spans],
            "ext": ext,
        }
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
    try:
        entries = [expand_step(step) for step in steps]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"record has a malformed step: {exc!r}") from None
    return Record(run_id, entries, spans, ext if isinstance(ext, list) else [])
