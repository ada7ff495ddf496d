"""Records: what one flush wrote for one run, as JSON, and the record files that hold them."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import zstandard

from otel_replay import attributes as A
from otel_replay.step import ENVELOPE_KINDS, RunFacts, Step
from otel_replay.store._derived import Derivation

__all__ = [
    "SPAN_STRING_MIN",
    "Record",
    "RecordError",
    "RunName",
    "SpanEntry",
    "SpanStep",
    "decode_record",
    "decode_records",
    "encode_record",
    "frame_record",
    "span_entry_json",
    "span_step",
    "step_entry",
    "step_from_entry",
    "steps_without_bytes",
]

VERSION = 4
_READ_VERSIONS = (3, VERSION)
"""Record versions read: format 3's records (no derived attributes) are read as they are."""
_HEAD = struct.Struct("<II")
SPAN_STRING_MIN = 1024
"""Span string attributes of at least this many bytes are stored as bodies (deduplicated:
``gen_ai.input.messages`` repeats the conversation, an inline body is its step's body)."""


class RecordError(ValueError):
    """Record bytes that cannot be decoded; the message says why."""


@dataclass(frozen=True, slots=True)
class SpanEntry:
    """A span as a record keeps it: the span with its long strings taken out, and the digest
    (hex) of each taken-out attribute's UTF-8 text by attribute key."""

    span: dict[str, Any]
    strings: dict[str, str] = field(default_factory=dict)
    derived: Derivation | None = None
    """The attributes left out as rebuilt from the step's bodies (``_derived``)."""


@dataclass(slots=True)
class SpanStep:
    """A step as its span states it, for counting the steps the store holds a span of but no
    recorded bytes (a step imported semantic): the span's ids, ``replay.step.index`` (None
    for another instrumentation's span, which the import marks with ``replay.step.kind``
    only), kind, model, error and tokens."""

    trace_id: str
    span_id: str
    index: int | None
    kind: str
    model: str | None
    error_type: str | None
    tokens_in: int | None
    tokens_out: int | None


_STEP_KINDS = frozenset({"llm", "http", *ENVELOPE_KINDS})


def _int_or_none(value: Any) -> int | None:
    return value if type(value) is int and -(2**63) <= value < 2**63 else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def span_step(span: Mapping[str, Any]) -> SpanStep | None:
    """What ``span`` says of its step, or None when it is no step's span (no
    ``replay.step.kind``, or one no replay serves)."""
    attrs = span.get("attributes")
    if not isinstance(attrs, Mapping):
        return None
    kind = attrs.get(A.REPLAY_STEP_KIND)
    if not isinstance(kind, str) or kind not in _STEP_KINDS:
        return None
    index = _int_or_none(attrs.get(A.REPLAY_STEP_INDEX))
    return SpanStep(
        trace_id=str(span.get("trace_id")),
        span_id=str(span.get("span_id")),
        index=None if index is None or index < 0 else index,
        kind=kind,
        model=_str_or_none(attrs.get("gen_ai.request.model"))
        or _str_or_none(attrs.get("gen_ai.response.model")),
        error_type=_str_or_none(attrs.get("error.type")),
        tokens_in=_int_or_none(attrs.get("gen_ai.usage.input_tokens")),
        tokens_out=_int_or_none(attrs.get("gen_ai.usage.output_tokens")),
    )


def steps_without_bytes(
    spans: Iterable[SpanStep | None], entries: Iterable[Mapping[str, Any]]
) -> list[SpanStep]:
    """The step spans of a record (``spans``: :func:`span_step` of each) whose steps its
    step ``entries`` do not state: what the index counts from spans (a recorded run's spans
    and steps come in one record, and add nothing)."""
    held = {entry["index"] for entry in entries}
    return [s for s in spans if s is not None and (s.index is None or s.index not in held)]


@dataclass(frozen=True, slots=True)
class RunName:
    """The name a recording was given in the store (its run id, or ``<id>@<number>`` when
    the id was taken), decided when it first flushed and carried by its records, so a
    rebuild gives it the same name whatever order the files list in."""

    name: str
    number: int


@dataclass(frozen=True, slots=True)
class RunEndFact:
    """A run's end as its record states it."""

    end_ns: int
    error_type: str | None


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record (see the module docstring); ``steps`` are entries for
    :func:`step_from_entry`."""

    run_id: str
    recording: str
    seq: int
    facts: RunFacts | None
    steps: list[dict[str, Any]]
    spans: list[SpanEntry]
    end: RunEndFact | None
    name: RunName | None = None


def _id_value(run_id: str) -> Any:
    try:
        run_id.encode("utf-8")
        return run_id
    except UnicodeEncodeError:
        return {"utf8b": base64.b64encode(run_id.encode("utf-8", "surrogatepass")).decode()}


def _id_from(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("utf8b"), str):
        return base64.b64decode(value["utf8b"]).decode("utf-8", "surrogatepass")
    raise RecordError("record has no run id")


def step_entry(step: Step) -> dict[str, Any]:
    """A step as its record states it (bodies by hex digest; ``within`` only when set)."""
    entry = {
        "index": step.index,
        "kind": step.kind,
        "method": step.method,
        "url": step.url,
        "request_headers": step.request_headers,
        "request": step.request_hash.removeprefix("sha256:"),
        "request_size": len(step.request_body),
        "status_code": step.status_code,
        "response_headers": step.response_headers,
        "response": None if step.response_hash is None else step.response_hash[7:],
        "response_size": len(step.response_body),
        "chunks": step.chunks,
        "complete": step.complete,
        "error_type": step.error_type,
        "start_ns": step.start_ns,
        "end_ns": step.end_ns,
        "trace_id": f"{step.trace_id:032x}",
        "span_id": f"{step.span_id:016x}",
        "provider": step.provider,
        "model": step.model,
        "tokens_in": step.tokens_in,
        "tokens_out": step.tokens_out,
    }
    if step.within is not None:
        entry["within"] = step.within
    return entry


def _typed(value: Any, kind: type, what: str, optional: bool = False) -> Any:
    if (value is None and optional) or (type(value) is kind):
        return value
    raise RecordError(f"step field {what} is {value!r}")


def step_from_entry(
    run_id: str,
    entry: Mapping[str, Any],
    request: bytes,
    response: bytes,
    run: RunFacts | None = None,
) -> Step:
    """The Step an entry states, with its bodies (already checked against their hashes) and
    its run's facts."""
    try:
        return Step(
            run_id=run_id,
            index=_typed(entry["index"], int, "index"),
            trace_id=int(entry["trace_id"], 16),
            span_id=int(entry["span_id"], 16),
            kind=_typed(entry["kind"], str, "kind"),
            method=_typed(entry["method"], str, "method"),
            url=_typed(entry["url"], str, "url"),
            request_headers=[(str(k), str(v)) for k, v in entry["request_headers"]],
            request_body=request,
            request_hash="sha256:" + entry["request"],
            status_code=_typed(entry["status_code"], int, "status_code", True),
            response_headers=[(str(k), str(v)) for k, v in entry["response_headers"]],
            response_body=response,
            response_hash=None if entry["response"] is None else "sha256:" + entry["response"],
            chunks=[(int(size), int(at)) for size, at in entry["chunks"]],
            complete=entry["complete"] is True,
            error_type=_typed(entry["error_type"], str, "error_type", True),
            start_ns=_typed(entry["start_ns"], int, "start_ns"),
            end_ns=_typed(entry["end_ns"], int, "end_ns"),
            provider=_typed(entry["provider"], str, "provider", True),
            model=_typed(entry["model"], str, "model", True),
            tokens_in=_typed(entry["tokens_in"], int, "tokens_in", True),
            tokens_out=_typed(entry["tokens_out"], int, "tokens_out", True),
            within=_typed(entry.get("within"), int, "within", True),
            run=run,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RecordError(f"malformed step entry: {exc!r}") from None


_HEX = frozenset("0123456789abcdef")


def _digest_hex(value: Any, optional: bool) -> None:
    if value is None and optional:
        return
    if not (isinstance(value, str) and len(value) == 64 and set(value) <= _HEX):
        raise RecordError(f"a body digest is {value!r}")


def check_entry(entry: Any) -> None:
    """RecordError unless ``entry`` is a well-formed step entry."""
    if not isinstance(entry, dict):
        raise RecordError("a step entry is not an object")
    _digest_hex(entry.get("request"), optional=False)
    _digest_hex(entry.get("response"), optional=True)
    step_from_entry("", entry, b"", b"")


def _facts_value(facts: RunFacts) -> dict[str, Any]:
    return {
        "mode": facts.mode,
        "seed": facts.seed,
        "commit": facts.commit,
        "code_dirty": facts.code_dirty,
        "start_ns": facts.start_ns,
        "parent": facts.parent_run_id,
    }


def _facts_from(run_id: str, value: Any) -> RunFacts | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RecordError("run facts are not an object")
    seed, commit, dirty = value.get("seed"), value.get("commit"), value.get("code_dirty")
    parent = value.get("parent")
    return RunFacts(
        run_id=run_id,
        mode=str(value.get("mode") or "record"),
        seed=seed if type(seed) is int else None,
        commit=commit if isinstance(commit, str) else None,
        code_dirty=dirty if isinstance(dirty, bool) else None,
        start_ns=int(value.get("start_ns") or 0),
        parent_run_id=parent if isinstance(parent, str) else None,
    )


def dumps(value: Any) -> bytes:
    """JSON bytes of ``value``; TypeError when it is not JSON-ready."""
    try:
        return orjson.dumps(value)
    except TypeError:  # lone surrogates: the standard library escapes them, and reads them back
        return json.dumps(value, separators=(",", ":")).encode()


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def span_entry_json(
    span: Mapping[str, Any], strings: Mapping[str, str], derived: dict[str, Any] | None = None
) -> bytes:
    """The JSON of one span entry of a record (``strings``: the hex digest of each long
    string attribute taken out of ``span``; ``derived``: how the attributes left out are
    rebuilt, ``Derivation.value``); TypeError when the span is not JSON-ready."""
    value: dict[str, Any] = {"span": span}
    if strings:
        value["strings"] = strings
    if derived is not None:
        value["derived"] = derived
    return dumps(value)


def _array(items: list[bytes]) -> orjson.Fragment:
    return orjson.Fragment(b"[" + b",".join(items) + b"]")


def _entries(steps: list[dict[str, Any]]) -> orjson.Fragment:
    """The JSON array of step entries: in one call, or one entry at a time when one of them
    needs :func:`dumps`' fallback (the same bytes either way)."""
    try:
        return orjson.Fragment(orjson.dumps(steps))
    except TypeError:
        return _array([dumps(entry) for entry in steps])


def encode_record(
    run_id: str,
    recording: str,
    seq: int,
    *,
    facts: RunFacts | None,
    steps: list[dict[str, Any]],
    spans: list[bytes],
    end: RunEndFact | None,
    name: RunName | None = None,
) -> bytes:
    """The JSON of one record; ``spans`` are the JSON of its span entries
    (:func:`span_entry_json`), encoded when they were put."""
    value: dict[str, Any] = {
        "v": VERSION,
        "run": _id_value(run_id),
        "recording": recording,
        "seq": seq,
        "steps": _entries(steps),
        "spans": _array(spans),
    }
    if facts is not None:
        value["facts"] = orjson.Fragment(dumps(_facts_value(facts)))
    if end is not None:
        value["end"] = orjson.Fragment(dumps({"end_ns": end.end_ns, "error_type": end.error_type}))
    if name is not None:
        value["name"] = {"name": _id_value(name.name), "number": name.number}
    # Every string left here is ASCII or valid UTF-8 (ids are made so), so orjson takes it.
    return orjson.dumps(value)


GROUP_BYTES = 64 << 10
"""Bytes of record JSON a merged file puts in one frame: enough for zstd to find what the
records repeat (keys, headers), few enough steps lost to one damaged byte."""


def frame_record(record_json: bytes, compressor: zstandard.ZstdCompressor) -> bytes:
    """One entry of a record file: length, crc32 and the zstd frame of ``record_json`` (one
    record, or several joined by newlines), compressed with ``compressor`` (not thread-safe:
    one per writer, reused)."""
    frame = compressor.compress(record_json)
    return _HEAD.pack(len(frame), zlib.crc32(frame)) + frame


@dataclass(frozen=True, slots=True)
class Frames:
    """The record JSONs a record file holds, and one line per damaged entry."""

    records: list[bytes]
    problems: list[str]


def read_frames(data: bytes) -> Frames:
    """The JSON of every record in a record file (not decoded); damaged entries are reported,
    the others kept. After a damaged length the rest cannot be framed: one problem."""
    records: list[bytes] = []
    problems: list[str] = []
    pos = 0
    decompressor = zstandard.ZstdDecompressor()
    while pos < len(data):
        if pos + _HEAD.size > len(data):
            problems.append(f"truncated entry header at byte {pos}")
            break
        size, crc = _HEAD.unpack_from(data, pos)
        start = pos + _HEAD.size
        frame = data[start : start + size]
        pos = start + size
        if len(frame) < size:
            problems.append(f"entry at byte {start - _HEAD.size} is cut short")
            break
        if zlib.crc32(frame) != crc:
            problems.append(f"entry at byte {start - _HEAD.size} fails its checksum")
            continue
        try:
            content = decompressor.decompress(frame)
        except zstandard.ZstdError as exc:
            problems.append(f"entry at byte {start - _HEAD.size}: {exc}")
            continue
        records.extend(line for line in content.split(b"\n") if line)
    return Frames(records, problems)


def merge_frames(records: list[bytes], level: int) -> bytes:
    """A record file holding ``records`` (JSON), grouped into frames of
    :data:`GROUP_BYTES` at zstd ``level``."""
    compressor = zstandard.ZstdCompressor(level=level)
    out: list[bytes] = []
    group: list[bytes] = []
    size = 0
    for record in records:
        if group and size + len(record) > GROUP_BYTES:
            out.append(frame_record(b"\n".join(group), compressor))
            group, size = [], 0
        group.append(record)
        size += len(record) + 1
    if group:
        out.append(frame_record(b"\n".join(group), compressor))
    return b"".join(out)


def decode_record(data: bytes) -> Record:
    """One record from its JSON; RecordError when it is not a valid record."""
    try:
        value = _loads(data)
    except ValueError as exc:
        raise RecordError(f"record is not JSON: {exc}") from None
    if not isinstance(value, dict) or value.get("v") not in _READ_VERSIONS:
        raise RecordError("record has an unknown version")
    run_id = _id_from(value.get("run"))
    recording, seq = value.get("recording"), value.get("seq")
    steps, spans = value.get("steps"), value.get("spans")
    if not (isinstance(recording, str) and type(seq) is int):
        raise RecordError("record has no recording or sequence number")
    if not (isinstance(steps, list) and isinstance(spans, list)):
        raise RecordError("record has no steps or spans list")
    for entry in steps:
        check_entry(entry)
    span_entries: list[SpanEntry] = []
    for item in spans:
        if not (isinstance(item, dict) and isinstance(item.get("span"), dict)):
            raise RecordError("a span entry is malformed")
        strings = item.get("strings") or {}
        if not isinstance(strings, dict):
            raise RecordError("a span entry's strings are malformed")
        for digest in strings.values():
            _digest_hex(digest, optional=False)
        derived = None
        if item.get("derived") is not None:
            try:
                derived = Derivation.from_value(item["derived"])
            except ValueError as exc:
                raise RecordError(str(exc)) from None
        span_entries.append(SpanEntry(item["span"], strings, derived))
    end_value = value.get("end")
    end = None
    if isinstance(end_value, dict):
        error = end_value.get("error_type")
        end = RunEndFact(
            int(end_value.get("end_ns") or 0), error if isinstance(error, str) else None
        )
    facts = _facts_from(run_id, value.get("facts"))
    return Record(run_id, recording, seq, facts, steps, span_entries, end, _name_from(value))


def _name_from(value: dict[str, Any]) -> RunName | None:
    given = value.get("name")
    if not isinstance(given, dict) or type(given.get("number")) is not int:
        return None
    try:
        return RunName(_id_from(given.get("name")), given["number"])
    except (RecordError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class Decoded:
    """What a record file yields: its readable records, and one line per damaged entry."""

    records: list[Record]
    problems: list[str]


def decode_records(data: bytes) -> Decoded:
    """Every record of a record file; damaged entries are reported, the others kept."""
    frames = read_frames(data)
    records: list[Record] = []
    problems = list(frames.problems)
    for raw in frames.records:
        try:
            records.append(decode_record(raw))
        except RecordError as exc:
            problems.append(str(exc))
    return Decoded(records, problems)


def iter_refs(record: Record) -> Iterator[bytes]:
    """The digests of every body a record references (bodies, span strings)."""
    for entry in record.steps:
        yield bytes.fromhex(entry["request"])
        if entry["response"] is not None:
            yield bytes.fromhex(entry["response"])
    for span in record.spans:
        for digest in span.strings.values():
            yield bytes.fromhex(digest)
        if span.derived is not None:
            yield from derived_refs(span)


def derived_refs(span: SpanEntry) -> list[bytes]:
    """The digests of the bodies a span's derived attributes are rebuilt from."""
    attrs = span.span.get("attributes")
    if span.derived is None or not isinstance(attrs, dict):
        return []
    tags = [attrs.get(A.REPLAY_REQUEST_HASH), attrs.get(A.REPLAY_RESPONSE_HASH)]
    return [bytes.fromhex(tag[7:]) for tag in tags if isinstance(tag, str) and _is_tag(tag)]


def _is_tag(tag: str) -> bool:
    return tag.startswith("sha256:") and len(tag) == 71 and set(tag[7:]) <= _HEX
