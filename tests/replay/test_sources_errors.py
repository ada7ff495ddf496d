"""Bad sources: each is refused with one line naming the thing, never a shorter run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from otel_replay.errors import (
    OtelReplayError,
    RunNotFoundError,
    SourceError,
    StoreFormatError,
    StoreNotFoundError,
)
from otel_replay.replay.sources import load_run
from tests.cli._checks import assert_bad_input, run_cli
from tests.replay.conftest import (
    CLAUDE,
    SUPPORT,
    Recorded,
    collector_json,
    one_span_per_line,
    otlp_request,
    protobuf_json,
    run_spans,
)


def refused(ref: str, error: type[OtelReplayError] = SourceError, store: str | None = None) -> str:
    with pytest.raises(error) as caught:
        load_run(ref, store=store)
    message = str(caught.value)
    assert "\n" not in message and message
    return message


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "traces.json"
    assert refused(str(missing)) == f"no such file: {missing}"


def test_a_directory_is_not_a_source(tmp_path: Path) -> None:
    assert str(tmp_path) in refused(str(tmp_path))


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_bytes(b"\n")
    assert f"{path} is empty" in refused(str(path))


def test_truncated_last_line_is_an_error_not_a_shorter_run(
    recorded: Recorded, tmp_path: Path
) -> None:
    lines = one_span_per_line(run_spans(recorded, SUPPORT), collector_json)
    count = lines.count(b"\n")
    path = tmp_path / "traces.json"
    path.write_bytes(lines[: -len(lines.split(b"\n")[-2]) // 2])
    message = refused(f"{path}#{SUPPORT}")
    assert message.startswith(f"{path}:{count}: invalid or truncated JSON")


def test_corrupt_line_in_the_middle(recorded: Recorded, tmp_path: Path) -> None:
    lines = one_span_per_line(run_spans(recorded, SUPPORT), collector_json).split(b"\n")
    lines[2] = lines[2][: len(lines[2]) // 2]
    path = tmp_path / "traces.json"
    path.write_bytes(b"\n".join(lines))
    assert refused(str(path)).startswith(f"{path}:3: invalid or truncated JSON")


def test_truncated_pretty_document(recorded: Recorded, tmp_path: Path) -> None:
    text = json.dumps(protobuf_json(run_spans(recorded, CLAUDE)), indent=2)
    path = tmp_path / "trace.json"
    path.write_text(text[: len(text) // 2])
    message = refused(str(path))
    assert message.startswith(f"{path}:") and "invalid or truncated JSON" in message


@pytest.mark.parametrize("start", [b"\n\xbb", b"\n\xef\x01", b"\n\xbf"])
def test_protobuf_cut_after_a_length_byte_like_a_byte_order_marks(
    tmp_path: Path, start: bytes
) -> None:
    """A length byte that is also a byte of UTF-8's byte order mark is not whitespace."""
    path = tmp_path / "trace.pb"
    path.write_bytes(start)
    assert refused(str(path)).startswith(f"{path} is neither OTLP JSON nor OTLP protobuf")


@pytest.mark.parametrize("cut", [2, 7, 1000, -1])
def test_truncated_protobuf(recorded: Recorded, tmp_path: Path, cut: int) -> None:
    data = otlp_request(run_spans(recorded, CLAUDE)).SerializeToString()
    path = tmp_path / "trace.pb"
    path.write_bytes(data[:cut])
    message = refused(str(path))
    assert message.startswith(f"{path} is neither OTLP JSON nor OTLP protobuf")


def test_bytes_that_are_not_otlp(tmp_path: Path) -> None:
    path = tmp_path / "random.bin"
    path.write_bytes(bytes(range(256)) * 4)
    assert str(path) in refused(str(path))


@pytest.mark.parametrize(
    "document",
    [{"traces": []}, [1, 2], "spans", {"data": [{"traceID": "abc"}]}],
    ids=["object", "list", "string", "jaeger-v1"],
)
def test_json_that_is_not_otlp(tmp_path: Path, document: object) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps(document))
    assert "not OTLP trace data" in refused(str(path))


def test_unreadable_id_names_the_span(recorded: Recorded, tmp_path: Path) -> None:
    document = collector_json(run_spans(recorded, CLAUDE))
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["spanId"] = "not an id"
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(document))
    message = refused(str(path))
    assert f"{path}: span {span['name']!r}" in message and "spanId" in message


def test_nothing_replayable(tmp_path: Path) -> None:
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "name": "GET /health",
        "kind": 2,
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "2",
        "attributes": [{"key": "http.route", "value": {"stringValue": "/health"}}],
    }
    document = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(document))
    assert refused(str(path)) == f"{path} has no replayable steps (no GenAI or replay step spans)"


def test_several_runs_need_a_selector(recorded: Recorded, tmp_path: Path) -> None:
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(collector_json(recorded.raw)))
    message = refused(str(path))
    assert f"{path}#RUN_ID" in message and SUPPORT in message and CLAUDE in message
    unknown = refused(f"{path}#r_nope")
    assert "no run 'r_nope'" in unknown and SUPPORT in unknown
    # A unique prefix picks its run, as in a store; one that several share lists those.
    assert load_run(f"{path}#{SUPPORT[:15]}").run_id == SUPPORT
    several = refused(f"{path}#r_2026")
    assert several.startswith(f"{path}#r_2026 names 4 runs; pick one with {path}#RUN_ID: ")
    assert SUPPORT in several and CLAUDE in several


def test_unknown_run_id(store: Path) -> None:
    message = refused("r_nope", RunNotFoundError, store=str(store))
    assert "'r_nope'" in message and str(store) in message


def test_no_store(tmp_path: Path) -> None:
    message = refused("r_nope", StoreNotFoundError, store=str(tmp_path / "none"))
    assert "'r_nope'" in message


def test_store_of_an_unknown_format_version(store: Path) -> None:
    (store / "FORMAT").write_text(json.dumps({"format": "otel-replay-store", "version": 99}))
    assert str(store / "FORMAT") in refused(SUPPORT, StoreFormatError, store=str(store))


def _first_span(document: dict[str, Any]) -> dict[str, Any]:
    span: dict[str, Any] = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    return span


def _int_attributes(document: dict[str, Any], value: str) -> None:
    for attribute in _first_span(document)["attributes"]:
        if "intValue" in attribute["value"]:
            attribute["value"] = {"intValue": value}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: _first_span(d).update(endTimeUnixNano=str(2**64 - 1)), "endTimeUnixNano"),
        (lambda d: _first_span(d).update(startTimeUnixNano="-5"), "startTimeUnixNano '-5'"),
        (lambda d: _int_attributes(d, str(2**80)), "intValue '1208925819614629174706176'"),
        (lambda d: _int_attributes(d, "9" * 5000), "intValue '999"),
        (lambda d: d["resourceSpans"][0].update(resource=[1]), "resource is not an object"),
        (lambda d: d["resourceSpans"][0]["scopeSpans"][0].update(spans={"a": 1}), "spans is"),
        (lambda d: d["resourceSpans"][0]["scopeSpans"][0].update(spans=[1]), "a span is not"),
        (lambda d: d["resourceSpans"][0].update(scopeSpans=["x"]), "scopeSpans entry is not"),
        (lambda d: _first_span(d).update(status="oops"), "status is not an object"),
        (lambda d: _first_span(d).update(events=[3]), "an event is not an object"),
    ],
    ids=[
        "time-past-int64", "negative-time", "int-past-int64", "int-of-5000-digits",
        "resource-list", "spans-object", "span-number", "scope-string", "status-string",
        "event-number",
    ],
)  # fmt: skip
def test_values_out_of_range_or_of_the_wrong_shape(
    recorded: Recorded, tmp_path: Path, change: Callable[[dict[str, Any]], None], expected: str
) -> None:
    """Refused at the source, naming the field: never stored (a time past int64 used to
    reach the index and fail there, after the run's record file was written)."""
    document = collector_json(run_spans(recorded, CLAUDE))
    change(document)
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(document))
    message = refused(str(path))
    assert message.startswith(f"{path}:") and expected in message
    assert "object has no attribute" not in message and len(message) < 300


def _step_index(document: dict[str, Any], value: dict[str, str]) -> None:
    for attribute in _first_span(document)["attributes"]:
        if attribute["key"] == "replay.step.index":
            attribute["value"] = value


@pytest.mark.parametrize(
    "value",
    [{"intValue": "-5"}, {"stringValue": "9" * 25}, {"stringValue": "second"}],
    ids=["negative", "past-int64", "a-word"],
)
def test_a_step_index_that_is_no_index_names_the_span(
    recorded: Recorded, tmp_path: Path, value: dict[str, str]
) -> None:
    """Never a shorter run (the span left out) nor a crash in the store."""
    document = collector_json(run_spans(recorded, CLAUDE))
    _step_index(document, value)
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(document))
    message = refused(str(path))
    span_id = _first_span(document)["spanId"]
    assert f"span {span_id} has replay.step.index" in message and "not a step index" in message


@pytest.mark.parametrize(
    ("value", "shown"),
    [({"stringValue": "sleep"}, "'sleep'"), ({"intValue": "3"}, "3")],
    ids=["a-newer-kind", "a-number"],
)
def test_a_step_of_a_kind_replay_does_not_know_names_the_span(
    recorded: Recorded, tmp_path: Path, value: dict[str, str], shown: str
) -> None:
    """A step span of a kind no replay serves (a newer otel-replay's) was left out: the run
    replayed one step short, with no word of it."""
    document = collector_json(run_spans(recorded, CLAUDE))
    span = _first_span(document)
    span["attributes"] = [a for a in span["attributes"] if a["key"] != "replay.step.kind"]
    span["attributes"].append({"key": "replay.step.kind", "value": value})
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(document))
    message = refused(str(path))
    assert f"span {span['spanId']} (step " in message
    assert f"has replay.step.kind {shown}, which this otel-replay does not replay" in message


def test_an_operation_name_that_is_a_list_is_no_model_call(
    recorded: Recorded, tmp_path: Path
) -> None:
    document = collector_json(run_spans(recorded, CLAUDE))
    for span in document["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for attribute in span["attributes"]:
            if attribute["key"] in ("gen_ai.operation.name", "replay.run.id"):
                attribute["value"] = {"arrayValue": {"values": [{"stringValue": "chat"}]}}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(document))
    assert "has no replayable steps" in refused(str(path))


def test_two_different_spans_with_one_span_id_are_both_kept(
    recorded: Recorded, tmp_path: Path
) -> None:
    """A span exported twice counts once; two different spans sharing an id are both kept
    (one was dropped: a shorter run, and a replay failing on the step it lacked)."""
    document = collector_json(run_spans(recorded, SUPPORT))
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"resourceSpans": document["resourceSpans"] * 2}))
    assert len(load_run(f"{path}#{SUPPORT}").steps) == 9  # the same spans twice: one run
    spans[3]["spanId"] = spans[2]["spanId"]
    path.write_text(json.dumps(document))
    assert [s.step.index for s in load_run(f"{path}#{SUPPORT}").steps] == list(range(9))


def _elsewhere(document: dict[str, Any], process: str, mark: str, later_s: int) -> dict[str, Any]:
    """``document``'s spans as another process exported them: its own service.instance.id,
    trace and span ids (marked by the hex digit ``mark``), ``later_s`` seconds later."""
    moved: dict[str, Any] = json.loads(json.dumps(document))
    for resource_spans in moved["resourceSpans"]:
        for attribute in resource_spans["resource"]["attributes"]:
            if attribute["key"] == "service.instance.id":
                attribute["value"] = {"stringValue": process}
        for span in resource_spans["scopeSpans"][0]["spans"]:
            span["traceId"] = mark * 32
            for key in ("spanId", "parentSpanId"):
                span[key] = mark + span[key][1:] if span.get(key) else ""
            for key in ("startTimeUnixNano", "endTimeUnixNano"):
                span[key] = str(int(span[key]) + later_s * 10**9)
    return moved


def test_two_programs_that_recorded_under_one_run_id_are_two_runs(
    recorded: Recorded, tmp_path: Path
) -> None:
    """A run id used by two programs (OTEL_REPLAY_RUN_ID kept, a re-run after a crash) holds
    two recordings in a backend: the file was refused ('spans ... both claim step 0') with no
    way to replay either. They are told apart as in the store: the id, then id@2. A worker
    process's steps (the run's next indexes, under a trace of its own) stay in its run."""
    first = collector_json(run_spans(recorded, SUPPORT))
    worker = _elsewhere(first, "worker-process", "a", 1)
    spans = worker["resourceSpans"][0]["scopeSpans"][0]["spans"]
    (last,) = [
        s
        for s in spans
        if {"key": "replay.step.index", "value": {"intValue": "8"}} in s["attributes"]
    ]
    last["attributes"] = [
        {"key": a["key"], "value": {"intValue": "9"}} if a["key"] == "replay.step.index" else a
        for a in last["attributes"]
    ]
    worker["resourceSpans"][0]["scopeSpans"][0]["spans"] = [last]
    again = _elsewhere(first, "another-process", "f", 60)
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in (again, worker, first)))
    message = refused(str(path))
    assert f"holds 2 runs; pick one with {path}#RUN_ID: {SUPPORT} (" in message
    assert refused(f"{path}#") == message  # an empty selector names no run (not path##RUN_ID)
    assert f"10 steps), {SUPPORT}@2 (" in message and "9 steps)" in message
    older, newer = load_run(f"{path}#{SUPPORT}"), load_run(f"{path}#{SUPPORT}@2")
    assert [s.step.index for s in older.steps] == list(range(10))
    assert [s.step.index for s in newer.steps] == list(range(9))
    assert newer.steps[0].step.start_ns - older.steps[0].step.start_ns == 60 * 10**9


@pytest.mark.parametrize("status", ["0", "99", "1000", str(2**63 - 1)])
def test_a_response_status_that_is_no_http_status_names_the_step(
    recorded: Recorded, tmp_path: Path, status: str
) -> None:
    document = collector_json(run_spans(recorded, CLAUDE))
    for attribute in _first_span(document)["attributes"]:
        if attribute["key"] == "replay.response.status_code":
            attribute["value"] = {"intValue": status}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(document))
    message = refused(str(path))
    assert "step 0 (" in message and f"response status {status} is not an HTTP status" in message


@pytest.mark.parametrize("key", ["gen_ai.output.messages", "gen_ai.input.messages"])
def test_messages_nested_deeper_than_json_reads_name_the_attribute(
    recorded: Recorded, tmp_path: Path, key: str
) -> None:
    """A span whose messages were JSON nested 100,000 levels deep once stopped show, diff,
    triage and report with an internal error (RecursionError, exit 70)."""
    document = collector_json(run_spans(recorded, CLAUDE))
    span = _first_span(document)
    deep = "[" * 100_000 + "]" * 100_000
    span["attributes"].append({"key": key, "value": {"stringValue": deep}})
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(document))
    message = refused(str(path))
    assert message.startswith(f"{path}: span ")
    assert message.endswith(f"attribute '{key}': JSON nested deeper than json reads")
    for verb in (["show", str(path)], ["triage", str(path)], ["diff", str(path), str(path)]):
        assert assert_bad_input(run_cli(*verb)) == f"Error: {message}"


def test_text_with_many_brackets_is_kept_as_it_is(recorded: Recorded, tmp_path: Path) -> None:
    document = collector_json(run_spans(recorded, CLAUDE))
    wide, prose = "[" + "[]," * 600 + "[]]", "[" * 600 + " a note, not JSON"
    span = _first_span(document)
    for key, text in (("app.wide", wide), ("app.prose", prose)):
        span["attributes"].append({"key": key, "value": {"stringValue": text}})
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(document))
    run = load_run(str(path))
    (step,) = [s for s in run.steps if "app.wide" in s.attributes]
    assert (step.attributes["app.wide"], step.attributes["app.prose"]) == (wide, prose)
