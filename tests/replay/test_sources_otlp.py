"""Runs rebuilt from the store and from OTLP files in every encoding seen in the wild equal
what crossed the wire when they were recorded."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, TracesData

from otel_replay.replay._model import Run
from otel_replay.replay.sources import load_run, load_sources
from otel_replay.replay.sources._documents import documents
from otel_replay.replay.sources._limits import Limits
from tests.replay.conftest import (
    CLAUDE,
    SUPPORT,
    Recorded,
    assert_matches_wire,
    collector_json,
    content_type,
    ints_as_numbers,
    one_span_per_line,
    otlp_request,
    protobuf_json,
    run_spans,
)


def step_facts(run: Run) -> list[tuple[Any, ...]]:
    """What must not depend on the source a run was rebuilt from."""
    return [
        (
            s.step.index,
            s.step.kind,
            s.endpoint,
            s.step.method,
            s.request_body,
            s.step.request_hash,
            s.step.status_code,
            s.step.response_body,
            s.fidelity,
            s.step.complete,
            s.step.error_type,
            s.step.provider,
            s.step.model,
            s.prompt_hash,
            s.tool_schema_version,
            [size for size, _ in s.step.chunks] if len(s.step.chunks) > 1 else None,
            content_type(s.step.response_headers),
        )
        for s in run.steps
    ]


def test_store_run_is_what_crossed_the_wire(recorded: Recorded, store: Path) -> None:
    run = load_run(SUPPORT, store=str(store))
    assert_matches_wire(run, recorded)
    assert [s.endpoint for s in run.steps] == [
        "openai.chat_completions",
        "GET /tools/orders/A-1234",
        "openai.chat_completions",
        "openai.chat_completions",
        "GET /tools/weather",
        "openai.chat_completions",
        "openai.chat_completions",
        "POST /tools/refunds",
        "openai.chat_completions",
    ]
    assert run.seed == 7 and run.commit and run.code_dirty is not None
    assert run.source == f"store {store}"
    streamed = run.steps[-1]
    assert len(streamed.step.chunks) > 1
    assert sum(size for size, _ in streamed.step.chunks) == len(streamed.step.response_body)
    assert [t for _, t in streamed.step.chunks] == sorted(t for _, t in streamed.step.chunks)
    assert run.resource.get("telemetry.sdk.name") == "opentelemetry"


def test_store_run_of_anthropic_stream(recorded: Recorded, store: Path) -> None:
    run = load_run(CLAUDE, store=str(store))
    assert_matches_wire(run, recorded)
    (claude,) = run.steps
    assert claude.endpoint == "anthropic.messages" and claude.step.provider == "anthropic"
    assert content_type(claude.step.response_headers) == "text/event-stream"


def _jsonl(encode: Callable[..., Any]) -> Callable[[Recorded], bytes]:
    return lambda rec: json.dumps(encode(rec.raw)).encode() + b"\n"


def _snake(spans: Any) -> dict[str, Any]:
    return protobuf_json(spans, preserving_proto_field_name=True)


def _enum_numbers(spans: Any) -> dict[str, Any]:
    return protobuf_json(spans, use_integers_for_enums=True)


def _delimited(rec: Recorded) -> bytes:
    out = b""
    for span in rec.raw:
        message = otlp_request([span]).SerializeToString()
        out += _varint(len(message)) + message
    return out


def _varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def _traces_data(rec: Recorded) -> bytes:
    request = otlp_request(rec.raw)
    return TracesData(resource_spans=request.resource_spans).SerializeToString()


ENCODINGS: dict[str, Callable[[Recorded], bytes]] = {
    "protobuf-json-base64-ids": _jsonl(protobuf_json),
    "collector-hex-ids-enum-numbers": _jsonl(collector_json),
    "int64-as-numbers": _jsonl(lambda spans: ints_as_numbers(collector_json(spans))),
    "snake-case": _jsonl(_snake),
    "enum-integers": _jsonl(_enum_numbers),
    "one-span-per-line": lambda rec: one_span_per_line(rec.raw, collector_json),
    "pretty-document": lambda rec: json.dumps(protobuf_json(rec.raw), indent=2).encode(),
    "list-of-documents": lambda rec: json.dumps([collector_json([s]) for s in rec.raw]).encode(),
    "protobuf": lambda rec: otlp_request(rec.raw).SerializeToString(),
    "protobuf-traces-data": _traces_data,
    "protobuf-length-delimited": _delimited,
    "gzip-json-lines": lambda rec: gzip.compress(one_span_per_line(rec.raw, protobuf_json)),
}


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_otlp_file_rebuilds_the_recorded_runs(
    recorded: Recorded, store: Path, tmp_path: Path, encoding: str
) -> None:
    path = tmp_path / "traces.data"  # the content decides, not the name
    path.write_bytes(ENCODINGS[encoding](recorded))
    for run_id in (SUPPORT, CLAUDE):
        run = load_run(f"{path}#{run_id}")
        assert run.run_id == run_id and run.source == str(path)
        assert_matches_wire(run, recorded)
        from_store = load_run(run_id, store=str(store))
        assert step_facts(run) == step_facts(from_store)
        assert (run.commit, run.seed, run.code_dirty) == (
            from_store.commit,
            from_store.seed,
            from_store.code_dirty,
        )
        assert run.resource == from_store.resource


def test_runs_of_a_file_come_oldest_first(recorded: Recorded, tmp_path: Path) -> None:
    path = tmp_path / "traces.json"
    path.write_bytes(one_span_per_line(recorded.raw, collector_json))
    assert [r.run.run_id for r in load_sources(str(path))][:2] == [SUPPORT, CLAUDE]


def test_one_run_needs_no_selector(recorded: Recorded, tmp_path: Path) -> None:
    path = tmp_path / "claude.json"
    path.write_text(json.dumps(collector_json(run_spans(recorded, CLAUDE))))
    assert load_run(str(path)).run_id == CLAUDE


def test_unknown_fields_are_ignored(recorded: Recorded, tmp_path: Path) -> None:
    document = collector_json(run_spans(recorded, CLAUDE))
    document["somethingNew"] = {"x": 1}
    for resource_spans in document["resourceSpans"]:
        resource_spans["schemaUrl"] = "https://opentelemetry.io/schemas/1.30.0"
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                span["flags"] = 257
                span["futureField"] = [1, 2, 3]
    path = tmp_path / "claude.json"
    path.write_text(json.dumps(document))
    assert_matches_wire(load_run(str(path)), recorded)


def test_duplicate_lines_count_once(recorded: Recorded, tmp_path: Path) -> None:
    lines = one_span_per_line(run_spans(recorded, CLAUDE), collector_json)
    path = tmp_path / "claude.json"
    path.write_bytes(lines + lines)
    assert len(load_run(str(path)).steps) == 1


def test_protobuf_that_starts_like_json_is_still_protobuf() -> None:
    for size in range(1, 200):
        resource_spans = ResourceSpans()
        resource_spans.resource.attributes.append(
            KeyValue(key="service.name", value=AnyValue(string_value="x" * size))
        )
        if resource_spans.ByteSize() == ord("{"):
            break
    data = TracesData(resource_spans=[resource_spans]).SerializeToString()
    assert data.startswith(b"\n{")  # a newline, then what looks like a JSON object
    (document,) = documents(data, "trace.pb", Limits.from_env())
    (decoded,) = document.resource_spans
    assert decoded["resource"]["attributes"][0]["value"] == {"stringValue": "x" * size}
