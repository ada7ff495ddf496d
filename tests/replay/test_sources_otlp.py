"""Runs rebuilt from the store and from OTLP files in every encoding seen in the wild equal
what crossed the wire when they were recorded."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, TracesData

import otel_replay
from otel_replay.replay._model import Run
from otel_replay.replay.sources import load_run, load_sources
from otel_replay.replay.sources._documents import documents
from otel_replay.replay.sources._limits import Limits
from otel_replay.runs import RUN_FACTS
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


def _replays_with_its_facts(run: Run, facts: dict[str, Any]) -> None:
    """``run`` has the recorded ``facts``, a ``run()`` block replaying it gets the recorded
    seed, and its first request is served from it."""
    assert (run.seed, run.commit, run.code_dirty) == (
        facts["replay.seed"],
        facts["vcs.ref.head.revision"],
        facts["replay.code.dirty"],
    )
    first = run.steps[0]
    assert first.request_body is not None
    with otel_replay.replaying(run) as result, httpx.Client() as client:
        with otel_replay.run(name="support-agent") as again:
            assert again.seed == facts["replay.seed"]
        # A model call is matched by its body alone, wherever it is sent.
        client.post("http://model.test/v1/chat/completions", content=first.request_body)
    (served,) = result.steps
    assert (served.recorded, served.how) == (0, "hash")


def test_run_facts_ride_on_the_run_span_and_replay_from_a_file_and_the_store(
    recorded: Recorded, store: Path, tmp_path: Path
) -> None:
    spans = run_spans(recorded, SUPPORT)
    (own,) = [s for s in spans if s.name == "invoke_agent support-agent"]
    facts = {key: (own.attributes or {})[key] for key in RUN_FACTS}
    assert facts["replay.seed"] == 7
    steps = [s for s in spans if "replay.step.index" in (s.attributes or {})]
    assert steps and not any(RUN_FACTS & (s.attributes or {}).keys() for s in steps)
    path = tmp_path / "support.json"
    path.write_text(json.dumps(collector_json(spans)))
    _replays_with_its_facts(load_run(str(path)), facts)
    _replays_with_its_facts(load_run(SUPPORT, store=str(store)), facts)


def test_run_facts_on_each_step_of_an_older_recording_are_read(
    recorded: Recorded, tmp_path: Path
) -> None:
    """Recordings made before the facts moved to the run's span carry them on every step;
    here the run's span lacks them, so only the steps have them."""
    spans = run_spans(recorded, SUPPORT)
    (own,) = [s for s in spans if s.name == "invoke_agent support-agent"]
    document = collector_json(spans)
    moved = [
        attribute
        for attribute in _json_attributes(document, own.name)
        if attribute["key"] in RUN_FACTS
    ]
    assert len(moved) == len(RUN_FACTS)
    for span in _json_spans(document):
        keys = {attribute["key"] for attribute in span["attributes"]}
        if span["name"] == own.name:
            span["attributes"] = [a for a in span["attributes"] if a["key"] not in RUN_FACTS]
        elif "replay.step.index" in keys:
            span["attributes"] += moved
    path = tmp_path / "old.json"
    path.write_text(json.dumps(document))
    facts = {key: (own.attributes or {})[key] for key in RUN_FACTS}
    _replays_with_its_facts(load_run(str(path)), facts)


def _json_spans(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        span
        for resource in document["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]


def _json_attributes(document: dict[str, Any], name: str) -> list[dict[str, Any]]:
    (span,) = [s for s in _json_spans(document) if s["name"] == name]
    return list(span["attributes"])


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


def test_a_file_that_starts_with_a_byte_order_mark_is_read(
    recorded: Recorded, tmp_path: Path
) -> None:
    # Saved by an editor that marks UTF-8 files (Notepad, PowerShell's Out-File).
    document = json.dumps(collector_json(run_spans(recorded, CLAUDE)))
    for name, data in (("whole", document), ("lines", f"{document}\n{document}\n")):
        path = tmp_path / f"{name}.json"
        path.write_bytes(b"\xef\xbb\xbf" + data.encode())
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
