"""A failed run fails on the wire too: its own span ends with status ERROR and ``error.type``
(as ``runs`` shows it), and ``import`` of the OTLP data stores it failed; a run that got over
a failed step stays ok.

``_failing_agent.py`` runs under ``opentelemetry-instrument`` with
``OTEL_TRACES_EXPORTER=otlp,replay``: the real OTLP exporter sends to a real receiver, whose
requests become an OTLP JSON file as the Collector's file exporter writes it. Before, every
run's span ended UNSET and ``import`` stored every run ok.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import otel_replay
from examples.otlp_sink import OtlpSink
from examples.standin import StandIn
from otel_replay.errors import ToolContractError
from tests.cli._checks import run_cli
from tests.export._support import INSTRUMENT, Pipeline, subprocess_env
from tests.replay.conftest import _rewrite_ids_and_enums

AGENT = Path(__file__).with_name("_failing_agent.py")
KEY = "sk-live-FAILRUN-9d3c1a7e5b2f4086"
PROCESS_RUN = "r_20261201T090000_0fa11ed0"
ENDINGS = {
    "raise": ("RuntimeError", "RuntimeError: refund service refused key REDACTED"),
    "exit": ("exit status 3", "exit status 3"),
}


@pytest.fixture(scope="module", params=sorted(ENDINGS))
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The ending, the store, the OTLP JSON file and its spans (as plain dicts)."""
    ending: str = request.param
    tmp = tmp_path_factory.mktemp(f"failed-{ending}")
    store = tmp / "store"
    with StandIn(event_delay=0.001) as standin, OtlpSink() as sink:
        env = subprocess_env(
            store,
            OTEL_TRACES_EXPORTER="otlp,replay",
            OTEL_EXPORTER_OTLP_ENDPOINT=sink.grpc_endpoint,
            OTEL_EXPORTER_OTLP_INSECURE="true",
            OTEL_REPLAY_RUN_ID=PROCESS_RUN,
        )
        done = subprocess.run(
            [str(INSTRUMENT), sys.executable, str(AGENT), standin.openai_base_url, ending],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == (1 if ending == "raise" else 3), done.stderr
        spans = sink.wait_for_spans(lambda got: any(_is_run(s, PROCESS_RUN) for s in got), 10)
        bodies = [r.body for r in sink.requests() if r.signal == "traces"]
    otlp = tmp / "export.jsonl"
    lines = (
        json.dumps(_rewrite_ids_and_enums(json_format.MessageToDict(message)))
        for message in map(ExportTraceServiceRequest.FromString, bodies)
    )
    otlp.write_text("".join(line + "\n" for line in lines))
    return ending, store, otlp, spans


def _is_run(span: dict[str, Any], run_id: str) -> bool:
    attrs = span["attributes"]
    return attrs.get("replay.run.id") == run_id and "replay.step.index" not in attrs


def _run_span(spans: list[dict[str, Any]], run_id: str) -> dict[str, Any]:
    (span,) = [s for s in spans if _is_run(s, run_id)]
    return span


def _statuses(store: Path) -> dict[str, str]:
    """Each run's status cell in the ``otel-replay runs`` table."""
    listed = run_cli("runs", "--store", str(store), env={"COLUMNS": "200"})
    assert listed.exit_code == 0, listed.stderr
    rows = [line.split("   ") for line in listed.stdout.splitlines() if line.startswith("r_")]
    cells = [[cell.strip() for cell in row if cell.strip()] for row in rows]
    return {row[0]: row[2] for row in cells}


@pytest.mark.subprocess
def test_the_failed_runs_spans_say_how_they_failed(recorded: Any) -> None:
    ending, _, otlp, spans = recorded
    error_type, description = ENDINGS[ending]
    root = _run_span(spans, PROCESS_RUN)
    assert root["name"] == "invoke_agent _failing_agent.py" and root["parent_span_id"] is None
    assert root["status"] == {"code": "ERROR", "message": description}
    assert root["attributes"]["error.type"] == error_type
    assert root["attributes"]["replay.failure.severity"] == "critical"
    assert "replay.failure.category" not in root["attributes"]  # no rule says which
    block = _run_span(spans, "r_block")
    assert block["status"] == {"code": "ERROR", "message": "LookupError: no order A-2"}
    assert block["attributes"]["error.type"] == "LookupError"
    # Got over its rate limit: the step failed, the run did not.
    recovered = _run_span(spans, "r_recovered")
    steps = [s for s in spans if s["attributes"].get("replay.run.id") == "r_recovered"]
    assert [s["attributes"].get("error.type") for s in steps if s is not recovered] == [
        "rate_limit_exceeded",
        None,
    ]
    assert recovered["status"]["code"] == "UNSET"
    assert "error.type" not in recovered["attributes"]
    assert KEY.encode() not in otlp.read_bytes()  # the message quoted the key: redacted


@pytest.mark.subprocess
def test_runs_and_an_import_of_the_otlp_file_agree(recorded: Any, tmp_path: Path) -> None:
    ending, store, otlp, _ = recorded
    expected = {
        PROCESS_RUN: f"error ({ENDINGS[ending][0]})",
        "r_block": "error (LookupError)",
        "r_recovered": "ok",
    }
    assert _statuses(store) == expected
    fresh = tmp_path / "imported"
    imported = run_cli("import", str(otlp), "--store", str(fresh))
    assert imported.exit_code == 0, imported.stderr
    assert _statuses(fresh) == expected


@otel_replay.tool(effect="read")
def lookup_order(order_id: str) -> dict[str, str]:
    return {"order_id": order_id}


def test_a_run_ended_by_a_broken_tool_contract_says_so(pipeline: Pipeline) -> None:
    memory = InMemorySpanExporter()
    pipeline.provider.add_span_processor(SimpleSpanProcessor(memory))
    with pytest.raises(ToolContractError), otel_replay.run("orders", run_id="r_contract"):
        lookup_order(order_id=1234)  # type: ignore[arg-type]
    pipeline.stop()
    (span,) = [s for s in memory.get_finished_spans() if s.name == "invoke_agent orders"]
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == (
        "otel_replay.errors.ToolContractError: tool 'lookup_order': invalid_arguments at "
        "$.order_id: 1234 is not of type 'string'"
    )
    assert span.attributes is not None
    assert span.attributes["error.type"] == "otel_replay.errors.ToolContractError"
    assert span.attributes["replay.failure.category"] == "contract_violation"
    assert span.attributes["replay.failure.severity"] == "critical"
    with pipeline.open_store() as store:
        (run,) = store.runs()
    assert run.error_type == "otel_replay.errors.ToolContractError"
