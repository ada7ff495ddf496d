"""Traces of the official openai instrumentation with no span around the calls: each call is a
trace of its own, and the calls of one process make one run that replays as a whole.

Recorded for real: ``opentelemetry-instrument`` with the official instrumentation alone
(opentelemetry-instrumentation-openai-v2, content on spans, otel-replay off) runs
``_concurrent_agent.py`` (twelve concurrent calls through the real openai SDK, threads in one
process and asyncio in another) against the stand-in, exporting OTLP to a real receiver; the
export requests become the lines of an OTLP JSON file as the Collector's file exporter writes
them. The program then replays from that file, through the CLI, with the stand-in stopped.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from examples.otlp_sink import OtlpSink
from examples.standin import StandIn
from otel_replay.errors import SourceError
from otel_replay.replay.sources import _group, load_run, load_sources
from otel_replay.replay.sources._group import (
    GroupingError,
    describe,
    group_runs,
    process_key,
    summary,
)
from tests.export._support import INSTRUMENT, ROOT, instrumentations, subprocess_env
from tests.replay.conftest import _rewrite_ids_and_enums
from tests.replay.test_replay_cli import CLI, replay

SCRIPT = Path(__file__).with_name("_concurrent_agent.py")
DEAD = "http://127.0.0.1:9/v1"
HOW = ("threads", "asyncio")


def _lines(requests: list[bytes]) -> str:
    """OTLP JSON lines, one export request per line, hex ids (the Collector's file exporter)."""
    out = []
    for body in requests:
        message = ExportTraceServiceRequest.FromString(body)
        out.append(json.dumps(_rewrite_ids_and_enums(json_format.MessageToDict(message))))
    return "".join(line + "\n" for line in out)


def _record(standin: StandIn, sink: OtlpSink, how: str, tmp: Path) -> dict[str, Any]:
    """Run the program under the official instrumentation alone; its answers."""
    env = subprocess_env(
        tmp / "unused-store",
        OTEL_SERVICE_NAME="concurrent-agent",
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_EXPORTER_OTLP_ENDPOINT=sink.grpc_endpoint,
        OTEL_EXPORTER_OTLP_INSECURE="true",
        **instrumentations("openai", ours=False),
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_ONLY",
    )
    done = subprocess.run(
        [str(INSTRUMENT), sys.executable, str(SCRIPT), str(ROOT), standin.openai_base_url, how],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answers: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])["answers"]
    return answers


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """For each of threads and asyncio: the answers, and the OTLP JSON file of that process
    alone; ``both``: one file with the two processes."""
    tmp = tmp_path_factory.mktemp("foreign-runs")
    out: dict[str, Any] = {}
    every: list[bytes] = []
    with StandIn(event_delay=0.001) as standin:
        for how in HOW:
            with OtlpSink() as sink:
                out[how] = _record(standin, sink, how, tmp)
                sink.wait_for_spans(12, 10)
                bodies = [r.body for r in sink.requests() if r.signal == "traces"]
            path = tmp / f"{how}.jsonl"
            path.write_text(_lines(bodies))
            out[f"{how}_file"] = path
            every += bodies
    both = tmp / "both.jsonl"
    both.write_text(_lines(every))
    out["both_file"] = both
    return out


def _spans(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text().splitlines():
        for resource_spans in json.loads(line)["resourceSpans"]:
            for scope_spans in resource_spans["scopeSpans"]:
                yield from scope_spans["spans"]


@pytest.mark.subprocess
@pytest.mark.parametrize("how", HOW)
def test_twelve_concurrent_calls_are_twelve_traces_and_one_run(
    recorded: dict[str, Any], how: str
) -> None:
    path = recorded[f"{how}_file"]
    spans = list(_spans(path))
    assert len(spans) == 12 and len({s["traceId"] for s in spans}) == 12
    assert not any(s.get("parentSpanId") for s in spans)  # nothing around the calls
    (loaded,) = load_sources(str(path))
    run = loaded.run
    first = min(spans, key=lambda s: int(s["startTimeUnixNano"]))
    assert run.run_id == first["traceId"]
    assert len(run.steps) == 12
    assert {step.fidelity for step in run.steps} == {"semantic"}
    assert run.resource["service.name"] == "concurrent-agent"


@pytest.mark.subprocess
@pytest.mark.parametrize("how", HOW)
def test_the_file_replays_as_a_whole_with_all_twelve_answers(
    recorded: dict[str, Any], how: str
) -> None:
    """The stand-in is stopped: every answer comes from the file, each to its own question
    although the calls arrive in another order than the file's."""
    path = recorded[f"{how}_file"]
    done = replay(
        path.parent / "store", str(path), sys.executable, str(SCRIPT), str(ROOT), DEAD, how
    )
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in reversed(done.stdout.splitlines()) if x.startswith('{"answers"'))
    answers = json.loads(line)["answers"]
    assert answers == recorded[how]
    assert len(answers) == 12
    for number, question in enumerate(sorted(answers)):
        if number % 2 == 0:  # offered the tool: the answer names this question's order
            order = question.split()[-1].rstrip("?")
            assert answers[question]["calls"] == [["lookup_order", {"order_id": order}]]
    assert ": identical" in done.stdout, done.stdout
    assert "matched: messages 12;" in done.stdout
    assert "network attempts: 0" in done.stdout


@pytest.mark.subprocess
def test_a_file_of_two_processes_holds_two_runs_and_names_each(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    path = recorded["both_file"]
    runs = load_sources(str(path))
    assert [len(r.run.steps) for r in runs] == [12, 12]
    done = replay(tmp_path / "store", str(path), sys.executable, str(SCRIPT), str(ROOT), DEAD, "x")
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"{path} holds 2 runs; pick one with {path}#RUN_ID: " in line
    for loaded in runs:
        assert f"{loaded.run.run_id} (20" in line  # its id, then its first span's time
    assert line.count(", 12 steps)") == 2


@pytest.mark.subprocess
@pytest.mark.parametrize("how", HOW)
def test_run_id_or_any_trace_id_picks_one_run_of_several(
    recorded: dict[str, Any], how: str
) -> None:
    both = recorded["both_file"]
    alone = load_run(str(recorded[f"{how}_file"]))
    assert load_run(f"{both}#{alone.run_id}").steps == alone.steps
    last = max(_spans(recorded[f"{how}_file"]), key=lambda s: int(s["startTimeUnixNano"]))
    assert load_run(f"{both}#{last['traceId']}").run_id == alone.run_id
    done = replay(
        both.parent / "store", f"{both}#{alone.run_id}", sys.executable, str(SCRIPT), str(ROOT),
        DEAD, how,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert ": identical" in done.stdout


@pytest.mark.subprocess
def test_an_unknown_run_is_refused_naming_the_runs_there(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    path = recorded["both_file"]
    with pytest.raises(SourceError) as caught:
        load_run(f"{path}#r_nope")
    message = str(caught.value)
    assert "\n" not in message
    assert f"{path} has no run 'r_nope'; it holds: " in message
    assert message.count(", 12 steps)") == 2
    done = replay(
        tmp_path / "s", f"{path}#r_nope", sys.executable, str(SCRIPT), str(ROOT), DEAD, "x"
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"Error: {message}"]


def _document_copy(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(documents: list[dict[str, Any]], path: Path) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in documents))
    return path


def _each_span(documents: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for document in documents:
        for resource_spans in document["resourceSpans"]:
            for scope_spans in resource_spans["scopeSpans"]:
                yield from scope_spans["spans"]


@pytest.mark.subprocess
def test_a_process_idle_past_the_gap_makes_a_new_run(
    recorded: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last four calls moved ten minutes later: two runs (8 + 4 steps) by the gap of
    300 s; one with a longer gap."""
    documents = copy.deepcopy(_document_copy(recorded["threads_file"]))
    spans = sorted(_each_span(documents), key=lambda s: int(s["startTimeUnixNano"]))
    for span in spans[8:]:
        for key in ("startTimeUnixNano", "endTimeUnixNano"):
            span[key] = str(int(span[key]) + 600 * 10**9)
    path = _write(documents, tmp_path / "later.jsonl")
    runs = load_sources(str(path))
    assert [len(r.run.steps) for r in runs] == [8, 4]
    assert [r.run.run_id for r in runs] == [spans[0]["traceId"], spans[8]["traceId"]]
    monkeypatch.setattr(_group, "IDLE_GAP_NS", 601 * 10**9)
    (whole,) = load_sources(str(path))
    assert len(whole.run.steps) == 12


# -- the grouping rules, on span dicts ---------------------------------------------------------


def _call(trace: int, start_s: float, resource: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A lone model call as a store span dict: trace ``trace``, one second long."""
    start = int((1_790_000_000 + start_s) * 1e9)
    return {
        "name": "chat gpt-4o-mini",
        "trace_id": f"{trace:032x}",
        "span_id": f"{trace:016x}",
        "parent_span_id": None,
        "start_ns": start,
        "end_ns": start + 10**9,
        "attributes": {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"},
        "resource": resource,
        **extra,
    }


def _sizes(spans: list[dict[str, Any]]) -> list[int]:
    return [len(run.spans) for run in group_runs(spans)]


@pytest.mark.parametrize(
    ("first", "second", "one_process"),
    [
        ({"service.instance.id": "a"}, {"service.instance.id": "a"}, True),
        ({"service.instance.id": "a"}, {"service.instance.id": "b"}, False),
        # same instance id, another service: another process
        ({"service.name": "x", "service.instance.id": "a"}, {"service.instance.id": "a"}, False),
        ({"process.pid": 7, "host.name": "h"}, {"process.pid": "7", "host.name": "h"}, True),
        ({"process.pid": 7, "host.name": "h"}, {"process.pid": 8, "host.name": "h"}, False),
        ({"process.pid": 7, "host.name": "h"}, {"process.pid": 7, "host.name": "g"}, False),
        # pid and host decide; other attributes (a detector's extra facts) do not
        ({"process.pid": 7, "os.type": "linux"}, {"process.pid": 7}, True),
        # a resource that says nothing: equal resources are one process
        ({"service.name": "x"}, {"service.name": "x"}, True),
        ({"service.name": "x"}, {"service.name": "x", "deployment": "b"}, False),
        ({}, {}, True),
    ],
)
def test_lone_calls_are_grouped_by_process(
    first: dict[str, Any], second: dict[str, Any], one_process: bool
) -> None:
    spans = [_call(1, 0, first), _call(2, 0.5, second), _call(3, 1, first)]
    assert _sizes(spans) == ([3] if one_process else [2, 1])
    assert process_key(first) != process_key(second) or one_process


def test_the_gap_is_idle_time_after_every_earlier_call_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resource = {"service.instance.id": "a"}
    long_call = _call(1, 0, resource)
    long_call["end_ns"] += 1000 * 10**9  # a call that ran 1001 s
    spans = [long_call, _call(2, 10, resource), _call(3, 1200, resource)]
    assert _sizes([_call(1, 0, resource), _call(2, 302, resource)]) == [1, 1]
    assert _sizes([_call(1, 0, resource), _call(2, 300, resource)]) == [2]
    assert _sizes(spans) == [3]  # 1200 s starts 199 s after the long call ended
    monkeypatch.setattr(_group, "IDLE_GAP_NS", 100 * 10**9)
    assert _sizes(spans) == [2, 1]


def test_a_trace_with_a_span_around_its_calls_is_a_run_of_its_own() -> None:
    resource = {"service.instance.id": "a"}
    agent = _call(9, 0, resource, name="invoke_agent support", span_id="09" * 8)
    agent["attributes"] = {"gen_ai.operation.name": "invoke_agent"}
    inner = [_call(9, 1, resource, span_id=f"{n:016x}", parent_span_id="09" * 8) for n in (1, 2)]
    runs = group_runs([_call(1, 0, resource), agent, *inner, _call(2, 3, resource)])
    assert sorted((run.run_id, len(run.spans)) for run in runs) == [
        (f"{1:032x}", 2),
        (f"{9:032x}", 3),
    ]


def test_a_lone_call_without_a_start_time_among_others_is_refused(tmp_path: Path) -> None:
    resource = {"service.instance.id": "a"}
    timeless = _call(2, 0, resource, start_ns=None)
    with pytest.raises(GroupingError, match=r"'chat gpt-4o-mini' \(trace 0+2\) has no start"):
        group_runs([_call(1, 0, resource), timeless])
    assert _sizes([timeless]) == [1]  # alone in its process, it needs no place


@pytest.mark.subprocess
def test_spans_that_cannot_be_grouped_are_a_one_line_error_naming_the_file(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    documents = _document_copy(recorded["threads_file"])
    next(_each_span(documents)).pop("startTimeUnixNano")
    path = _write(documents, tmp_path / "timeless.jsonl")
    with pytest.raises(SourceError) as caught:
        load_sources(str(path))
    message = str(caught.value)
    assert message.startswith(f"{path}: span 'chat gpt-4o-mini' (trace ")
    assert "has no start time" in message and "\n" not in message
    done = replay(tmp_path / "s", str(path), sys.executable, str(SCRIPT), str(ROOT), DEAD, "x")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"Error: {message}"]


def test_a_long_listing_is_cut_and_says_how_many_more() -> None:
    spans = [_call(n, 1000 * n, {"service.instance.id": "a"}) for n in range(1, 31)]
    line = describe([summary(run) for run in group_runs(spans)])
    assert line.count("1 step)") == 20
    assert line.endswith(", and 10 more (otel-replay import, then otel-replay runs, lists all)")
    assert f"{1:032x} (2026-09-21T" in line


@pytest.mark.subprocess
def test_imported_the_runs_of_a_file_replay_from_the_store(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    path = recorded["both_file"]
    runs = [loaded.run.run_id for loaded in load_sources(str(path))]
    done = subprocess.run(
        [str(CLI), "import", str(path), "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for run_id, how in zip(runs, HOW, strict=True):
        assert run_id in done.stdout
        replayed = replay(store, run_id, sys.executable, str(SCRIPT), str(ROOT), DEAD, how)
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        line = next(x for x in reversed(replayed.stdout.splitlines()) if x.startswith("{"))
        assert json.loads(line)["answers"] == recorded[how]
