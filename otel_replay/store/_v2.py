"""Reading a format-version-2 store, for ``migrate`` only."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import zstandard

from otel_replay.errors import StoreFormatError
from otel_replay.step import RunFacts, Step
from otel_replay.store._format import read_format_version

__all__ = ["ListedRun", "ListedStep", "Listing", "V2Run", "read_listing", "read_v2"]

_FOOTER = struct.Struct("<II8s")
_MAGIC = b"ORPACK1\n"
_PACK = re.compile(r"^([0-9a-f]{16})-([0-9a-f]{8,16})-([0-9a-f]{8,16})\.pack$")
_RAW, _RECIPE, _RECORD, _SEGMENT = 0, 1, 2, 3
_RANK = {_SEGMENT: 0, _RAW: 1, _RECIPE: 2, _RECORD: 3}


class _Damaged(ValueError):
    """Bytes of a version-2 pack or record that cannot be read."""


@dataclass(slots=True)
class V2Run:
    """One run of a version-2 store: its steps (bodies checked against their hashes), its
    spans as version 2 gave them back, whether it was pinned, and what could not be read
    (``lost``: the steps its index lists that are not among ``steps``)."""

    run_id: str
    pinned: bool
    steps: list[Step] = field(default_factory=list)
    spans: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    lost: int = 0
    held: dict[int, set[int]] = field(default_factory=dict)
    """The object numbers read, by stream id."""
    failed: set[int] = field(default_factory=set)
    """Steps whose record was read but which could not be rebuilt (named in ``problems``)."""


@dataclass(frozen=True, slots=True)
class ListedStep:
    """A step as version 2's index lists it: its stream, and the object numbers of its
    request, response (None: no response) and record."""

    stream: int
    request: int
    response: int | None
    record: int


@dataclass(frozen=True, slots=True)
class ListedRun:
    """A run as version 2's index lists it: its id and its steps, by index."""

    run_id: str
    steps: dict[int, ListedStep]


@dataclass(frozen=True, slots=True)
class Listing:
    """What version 2's index lists, by run directory name (None when it cannot be read:
    ``problem`` says why)."""

    runs: dict[str, ListedRun] | None
    problem: str | None = None


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _Damaged("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _pack_objects(data: bytes) -> dict[int, tuple[int, bytes]]:
    """Every object of a version-2 pack: number -> (kind, stored bytes)."""
    if len(data) < _FOOTER.size:
        raise _Damaged("shorter than a pack footer")
    size, crc, magic = _FOOTER.unpack(data[-_FOOTER.size :])
    trailer = data[-_FOOTER.size - size : -_FOOTER.size]
    if magic != _MAGIC or zlib.crc32(trailer) != crc:
        raise _Damaged("no valid pack trailer")
    decompress = zstandard.ZstdDecompressor().decompress
    try:
        table = decompress(trailer)
    except zstandard.ZstdError as exc:
        raise _Damaged(f"trailer: {exc}") from None
    first, pos = _varint(table, 0)
    _, pos = _varint(table, pos)
    frames, pos = _varint(table, pos)
    layout = []
    at = 0
    for _ in range(frames):
        length, pos = _varint(table, pos)
        count, pos = _varint(table, pos)
        layout.append((at, length, count))
        at += length
    objects: dict[int, tuple[int, bytes]] = {}
    oid = first
    for start, length, count in layout:
        tags = []
        for _ in range(count):
            tag, pos = _varint(table, pos)
            tags.append(tag)
        try:
            content = decompress(data[start : start + length])
        except zstandard.ZstdError as exc:
            raise _Damaged(f"frame at byte {start}: {exc}") from None
        offsets = [0] * count
        within = 0
        for n in sorted(range(count), key=lambda n: _RANK[tags[n] & 3]):
            offsets[n] = within
            within += tags[n] >> 2
        for n, tag in enumerate(tags):
            objects[oid + n] = (tag & 3, content[offsets[n] : offsets[n] + (tag >> 2)])
        oid += count
    return objects


def _recipe(data: bytes) -> tuple[bytes, list[bytes | int]]:
    """The 4-byte check and the parts (literals, object numbers) of a recipe."""
    count, pos = _varint(data, 4)
    parts: list[bytes | int] = []
    previous = -1
    for _ in range(count):
        tag, pos = _varint(data, pos)
        if tag & 1:
            zigzag = tag >> 1
            previous = previous + 1 + ((zigzag >> 1) ^ -(zigzag & 1))
            parts.append(previous)
        else:
            parts.append(data[pos : pos + (tag >> 1)])
            pos += tag >> 1
    return data[:4], parts


class _Stream:
    """The objects of one stream, assembled on demand."""

    def __init__(self, objects: dict[int, tuple[int, bytes]]) -> None:
        self.objects = objects

    def get(self, oid: int, depth: int = 0) -> bytes:
        if oid not in self.objects or depth > 8:
            raise _Damaged(f"object {oid} is missing")
        kind, data = self.objects[oid]
        if kind != _RECIPE:
            return data
        check, parts = _recipe(data)
        body = b"".join(p if isinstance(p, bytes) else self.get(p, depth + 1) for p in parts)
        if hashlib.sha256(body).digest()[:4] != check:
            raise _Damaged(f"object {oid} does not match its check")
        return body


def _attr(span: dict[str, Any], key: str) -> Any:
    attrs = span.get("attributes")
    return attrs.get(key) if isinstance(attrs, dict) else None


def _put_back(spans: list[dict[str, Any]], position: int, path: list[Any], value: str) -> None:
    target: Any = spans[position]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


def _spans(record: dict[str, Any], stream: _Stream) -> list[dict[str, Any]]:
    spans: list[dict[str, Any]] = list(record.get("spans") or [])
    for position, path, oid in record.get("ext") or []:
        _put_back(spans, position, path, stream.get(oid).decode("utf-8", "surrogatepass"))
    for position, path, source in record.get("tags") or []:
        tag = (
            source
            if isinstance(source, str)
            else "sha256:" + hashlib.sha256(stream.get(source)).hexdigest()
        )
        _put_back(spans, position, path, tag)
    return spans


def _tag(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _headers(items: list[Any], size: int) -> list[tuple[str, str]]:
    return [(str(name), str(size) if value is None else str(value)) for name, value in items]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _step(run_id: str, entry: dict[str, Any], stream: _Stream, span: dict[str, Any] | None) -> Step:
    request = stream.get(entry["request_oid"])
    response_oid = entry.get("response_oid")
    response = b"" if response_oid is None else stream.get(response_oid)
    start = int(entry["start_ns"])
    end = start + int(entry["duration_ns"])
    chunks = entry.get("chunks")
    facts = span or {}
    model = _attr(facts, "gen_ai.request.model") or _attr(facts, "gen_ai.response.model")
    return Step(
        run_id=run_id,
        index=int(entry["index"]),
        trace_id=int(entry["trace_id"], 16),
        span_id=int(entry["span_id"], 16),
        kind=str(entry["kind"]),
        method=str(entry["method"]),
        url=str(entry["url"]),
        request_headers=_headers(entry["request_headers"], len(request)),
        request_body=request,
        request_hash=_tag(request),
        status_code=_int(entry.get("status_code")),
        response_headers=_headers(entry["response_headers"], len(response)),
        response_body=response,
        response_hash=None
        if response_oid is None
        else "sha256:" + hashlib.sha256(response).hexdigest(),
        chunks=[(len(response), end - start)]
        if chunks is None
        else [(int(a), int(b)) for a, b in chunks],
        complete=entry.get("complete", True) is True,
        error_type=entry.get("error_type"),
        start_ns=start,
        end_ns=end,
        provider=_attr(facts, "gen_ai.provider.name"),
        model=model if isinstance(model, str) else None,
        tokens_in=_int(_attr(facts, "gen_ai.usage.input_tokens")),
        tokens_out=_int(_attr(facts, "gen_ai.usage.output_tokens")),
    )


def _run_facts(run_id: str, spans: list[dict[str, Any]]) -> RunFacts:
    starts = [s["start_ns"] for s in spans if isinstance(s.get("start_ns"), int)]
    values = {
        key: next((v for s in spans if (v := _attr(s, key)) is not None), None)
        for key in ("replay.seed", "vcs.ref.head.revision", "replay.code.dirty", "replay.mode")
    }
    return RunFacts(
        run_id=run_id,
        mode=str(values["replay.mode"] or "record"),
        seed=_int(values["replay.seed"]),
        commit=values["vcs.ref.head.revision"]
        if isinstance(values["vcs.ref.head.revision"], str)
        else None,
        code_dirty=values["replay.code.dirty"]
        if isinstance(values["replay.code.dirty"], bool)
        else None,
        start_ns=min(starts, default=0),
    )


def _read_stream(
    run: V2Run, directory: Path, stream_id: int, names: list[tuple[int, int, str]]
) -> None:
    """Add one stream's steps and spans to ``run``; its packs: (first, last, file name)."""
    objects: dict[int, tuple[int, bytes]] = {}
    covered = -1
    for _, last, name in sorted(names, key=lambda p: (p[0], -p[1])):
        if last <= covered:
            continue  # merged into a wider pack already read
        covered = last
        try:
            objects.update(_pack_objects((directory / name).read_bytes()))
        except (_Damaged, OSError) as exc:
            run.problems.append(f"pack {directory / name}: {exc}")
    run.held.setdefault(stream_id, set()).update(objects)
    stream = _Stream(objects)
    for oid in sorted(objects):
        kind, data = objects[oid]
        if kind != _RECORD:
            continue
        try:
            record = json.loads(data)
            spans = _spans(record, stream)
        except (ValueError, LookupError, TypeError, _Damaged) as exc:
            run.problems.append(f"record {oid} in {directory}: {exc}")
            continue
        if isinstance(record.get("run"), str):
            run.run_id = record["run"]  # the id itself: a directory name may be shortened
        run.spans.extend(spans)
        by_index = {_attr(s, "replay.step.index"): s for s in spans}
        for entry in record.get("steps") or []:
            try:
                run.steps.append(_step(run.run_id, entry, stream, by_index.get(entry.get("index"))))
            except (ValueError, LookupError, TypeError, _Damaged) as exc:
                run.problems.append(f"run {run.run_id!r} step {entry.get('index')}: {exc}")
                if isinstance(entry.get("index"), int):
                    run.failed.add(entry["index"])


def _dir_name(run_id: str) -> str:
    """The name version 2 gave the directory of ``run_id``'s packs."""
    quoted = quote(run_id, safe="-_~") or "%00"
    if len(quoted) > 180:
        quoted = f"{quoted[:120]}~{hashlib.sha256(run_id.encode()).hexdigest()[:16]}"
    return quoted


def read_listing(root: Path) -> Listing:
    """What the index of the version-2 store at ``root`` lists (see :class:`Listing`)."""
    where = root / "index.sqlite"
    try:
        conn = sqlite3.connect(f"file:{where.resolve().as_posix()}?immutable=1", uri=True)
    except sqlite3.Error as exc:
        return Listing(None, f"{where} cannot be read ({exc})")
    try:
        runs: dict[str, ListedRun] = {}
        by_num: dict[int, tuple[ListedRun, list[Any]]] = {}
        for run_id, num, streams in conn.execute("SELECT id, num, streams FROM runs"):
            listed = ListedRun(str(run_id), {})
            runs[_dir_name(listed.run_id)] = listed
            if num is not None:
                by_num[int(num)] = (listed, json.loads(streams) if streams else [])
        rows = conn.execute("SELECT key, stream, req_oid, resp_delta, rec_delta FROM steps")
        for key, number, request, response, record in rows:
            listed, streams = by_num[key >> 32]
            listed.steps[key & 0xFFFFFFFF] = ListedStep(
                streams[number][0],
                request,
                None if response is None else request + response,
                request + record,
            )
    except (sqlite3.Error, ValueError, LookupError, TypeError) as exc:
        return Listing(None, f"{where} cannot be read ({exc})")
    finally:
        conn.close()
    return Listing(runs)


def _lost(run: V2Run, listed: ListedRun) -> None:
    """Name each step ``listed`` that ``run`` does not hold, with the objects it lacks."""
    carried = {step.index for step in run.steps}
    for index, step in sorted(listed.steps.items()):
        if index in carried:
            continue
        run.lost += 1
        if index in run.failed:
            continue  # named when its record was read
        held = run.held.get(step.stream, set())
        parts = (("record", step.record), ("request", step.request), ("response", step.response))
        missing = [
            f"{what} (object {oid})" for what, oid in parts if oid is not None and oid not in held
        ]
        why = (
            f"no pack of stream {step.stream:016x} holds its {', '.join(missing)}"
            if missing
            else "its record could not be read"
        )
        run.problems.append(f"run {listed.run_id!r} step {index}: {why}")


def read_v2(root: Path, listing: Listing | None = None) -> Iterator[V2Run]:
    """Every run of the version-2 store at ``root``, read from its packs; with ``listing``
    (:func:`read_listing`), also each run it lists that has no packs left.

    StoreFormatError when ``root`` is not a version-2 store.
    """
    where = root / "FORMAT"
    version = read_format_version(where.read_bytes(), str(where))
    if version != 2:
        raise StoreFormatError(f"{where} is format version {version}, not 2")
    pins = {p.name for p in (root / "pins").glob("*")}
    listed = dict(listing.runs or {}) if listing is not None else {}
    directories = {p.name: p for p in (root / "packs").glob("*") if p.is_dir()}
    for name in sorted(set(directories) | set(listed)):
        streams: dict[int, list[tuple[int, int, str]]] = {}
        directory = directories.get(name, root / "packs" / name)
        for pack in directory.iterdir() if name in directories else ():
            match = _PACK.match(pack.name)
            if match is not None:
                streams.setdefault(int(match[1], 16), []).append(
                    (int(match[2], 16), int(match[3], 16), pack.name)
                )
        known = listed.get(name)
        run = V2Run(known.run_id if known else unquote(name), pinned=False)
        for stream_id, names in streams.items():
            _read_stream(run, directory, stream_id, names)
        run.pinned = name in pins  # a pin's file is named like the run's directory
        for step in run.steps:
            step.run_id = run.run_id
        if run.steps or run.spans:
            facts = _run_facts(run.run_id, run.spans)
            for step in run.steps:
                step.run = facts
            run.steps.sort(key=lambda s: s.index)
            run.spans.sort(key=lambda s: s.get("start_ns") or 0)
        if known is not None:
            _lost(run, known)
        yield run
