"""Flush records: the steps and spans of one run written by one flush, as JSON.

A record is what makes the packs self-describing: for each step, everything of the capture's
:class:`~otel_replay.capture._handoff.Fixture` but its bodies, which are objects of the stream
named by number; and the spans handed over with it (``_spans``: their long strings and hashes
taken out). The index is rebuilt from the records and the bodies they point at.

A step is stored without what something else already says:

* the sha256 and the size of its bodies: the index holds them (an index rebuilt from the
  packs computes them from the bodies; ``_sync``);
* its provider, model and token counts: its span says them, in the same record (``_facts``);
* an absent error, ``complete`` when true, a ``content-length`` header equal to its body's
  size, the single chunk of a response read in one piece, its end (a duration instead).

Decoding gives :class:`StoredStep`, whose :meth:`StoredStep.fixture` puts back what the
bodies imply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from otel_replay.capture._handoff import Fixture

__all__ = [
    "RECORD_VERSION",
    "Record",
    "StoredStep",
    "decode_record",
    "encode_record",
    "step_entry",
]

RECORD_VERSION = 2

Headers = list[tuple[str, str | None]]
"""Headers as a record stores them: a ``content-length`` equal to the body's size is None."""


def _lengths_out(headers: Sequence[tuple[str, str]], size: int) -> Sequence[Any]:
    """``headers`` with a ``content-length`` equal to ``size`` as None (its value is implied)."""
    text = str(size)
    for name, value in headers:
        if value == text and len(name) == 14 and name.lower() == "content-length":
            break
    else:
        return headers
    return [
        (name, None if value == text and name.lower() == "content-length" else value)
        for name, value in headers
    ]


def _lengths_in(headers: Sequence[tuple[str, str | None]], size: int) -> list[tuple[str, str]]:
    text = str(size)
    return [(name, text if value is None else value) for name, value in headers]


def step_entry(fixture: Fixture, request_oid: int, response_oid: int | None) -> bytes:
    """The record entry of one step (see the module docstring), its bodies as object numbers:
    JSON at once, so that a flush of many steps holds bytes, not containers."""
    duration = fixture.end_ns - fixture.start_ns
    size = len(fixture.response_body)
    entry: dict[str, Any] = {
        "index": fixture.step_index,
        "kind": fixture.kind,
        "method": fixture.method,
        "url": fixture.url,
        "request_headers": _lengths_out(fixture.request_headers, len(fixture.request_body)),
        "request_oid": request_oid,
        "status_code": fixture.status_code,
        "response_headers": _lengths_out(fixture.response_headers, size),
        "response_oid": response_oid,
        "start_ns": fixture.start_ns,
        "duration_ns": duration,
        "trace_id": f"{fixture.trace_id:032x}",
        "span_id": f"{fixture.span_id:016x}",
    }
    chunks = fixture.chunks
    if not (len(chunks) == 1 and chunks[0][0] == size and chunks[0][1] == duration):
        entry["chunks"] = chunks
    if not fixture.complete:
        entry["complete"] = False
    if fixture.error_type is not None:
        entry["error_type"] = fixture.error_type
    return orjson.dumps(entry)


@dataclass(frozen=True, slots=True)
class StoredStep:
    """A step as its record holds it; :meth:`fixture` completes it with its bodies."""

    index: int
    kind: str
    method: str
    url: str
    request_headers: Sequence[tuple[str, str | None]]
    request_oid: int
    status_code: int | None
    response_headers: Sequence[tuple[str, str | None]]
    response_oid: int | None
    chunks: Sequence[tuple[int, int]] | None
    """None: one chunk, the whole response, received at the end."""
    complete: bool
    error_type: str | None
    start_ns: int
    end_ns: int
    trace_id: int
    span_id: int

    def fixture(
        self,
        run_id: str,
        request: bytes,
        response: bytes,
        request_hash: str,
        response_hash: str | None,
    ) -> Fixture:
        """The capture's Fixture, from this step and its (verified) bodies and their hashes."""
        return Fixture(
            run_id=run_id,
            step_index=self.index,
            trace_id=self.trace_id,
            span_id=self.span_id,
            kind=self.kind,
            method=self.method,
            url=self.url,
            request_headers=_lengths_in(self.request_headers, len(request)),
            request_body=request,
            request_hash=request_hash,
            status_code=self.status_code,
            response_headers=_lengths_in(self.response_headers, len(response)),
            response_body=response,
            response_hash=response_hash,
            chunks=[(len(response), self.end_ns - self.start_ns)]
            if self.chunks is None
            else list(self.chunks),
            complete=self.complete,
            error_type=self.error_type,
            start_ns=self.start_ns,
            end_ns=self.end_ns,
        )


def _int(value: Any) -> int:
    if type(value) is not int:
        raise TypeError(f"{value!r} is not an integer")
    return value


def _optional(value: Any, kind: type) -> Any:
    if value is not None and type(value) is not kind:
        raise TypeError(f"{value!r} is not a {kind.__name__}")
    return value


def _headers(value: Any) -> Headers:
    headers: Headers = []
    for name, text in value:
        if type(name) is not str:
            raise TypeError(f"header name {name!r} is not a string")
        headers.append((name, _optional(text, str)))
    return headers


def _stored_step(entry: Any) -> StoredStep:
    """The StoredStep of a decoded entry; KeyError, TypeError or ValueError when malformed."""
    start = _int(entry["start_ns"])
    chunks = entry.get("chunks")
    return StoredStep(
        index=_int(entry["index"]),
        kind=_optional(entry["kind"], str),
        method=_optional(entry["method"], str),
        url=_optional(entry["url"], str),
        request_headers=_headers(entry["request_headers"]),
        request_oid=_int(entry["request_oid"]),
        status_code=_optional(entry["status_code"], int),
        response_headers=_headers(entry["response_headers"]),
        response_oid=_optional(entry["response_oid"], int),
        chunks=None if chunks is None else [(_int(size), _int(ns)) for size, ns in chunks],
        complete=entry.get("complete", True) is True,
        error_type=_optional(entry.get("error_type"), str),
        start_ns=start,
        end_ns=start + _int(entry["duration_ns"]),
        trace_id=int(entry["trace_id"], 16),
        span_id=int(entry["span_id"], 16),
    )


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded flush record: its steps, and its spans with the ``ext`` and ``tags`` entries
    that put their strings back (``_spans.restore``)."""

    run_id: str
    steps: list[StoredStep]
    spans: list[dict[str, Any]]
    ext: list[list[Any]]
    tags: list[list[Any]]


def encode_record(
    run_id: str,
    steps: list[bytes],
    spans: list[bytes],
    ext: list[tuple[Any, ...]],
    tags: list[tuple[Any, ...]],
) -> bytes:
    """The JSON bytes of a record: ``steps`` from :func:`step_entry`, ``spans`` already JSON
    (``_spans.prepare_span``); empty lists are left out."""
    value: dict[str, Any] = {
        "v": RECORD_VERSION,
        "run": run_id,
        "steps": [orjson.Fragment(step) for step in steps],
    }
    if spans:
        value["spans"] = [orjson.Fragment(span) for span in spans]
    if ext:
        value["ext"] = ext
    if tags:
        value["tags"] = tags
    return orjson.dumps(value)


def decode_record(data: bytes) -> Record:
    """Decode record bytes; ValueError when they are not a record this version reads."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"record is not JSON: {exc}") from None
    if not isinstance(value, dict) or value.get("v") != RECORD_VERSION:
        raise ValueError("record has an unknown version")
    run_id, steps = value.get("run"), value.get("steps")
    spans, ext, tags = (value.get(key, []) for key in ("spans", "ext", "tags"))
    if not (isinstance(run_id, str) and isinstance(steps, list) and isinstance(spans, list)):
        raise ValueError("record is missing its run, steps or spans")
    if not (isinstance(ext, list) and isinstance(tags, list)):
        raise ValueError("record has malformed ext or tags entries")
    try:
        stored = [_stored_step(entry) for entry in steps]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"record has a malformed step: {exc!r}") from None
    return Record(run_id, stored, spans, ext, tags)
