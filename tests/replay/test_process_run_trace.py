"""Our own steps outside any ``run()`` block: one trace per process run, on the wire and in the
store, and the run replays from either.

``_concurrent_agent.py`` (twelve concurrent calls through the real openai SDK, no span of its
own) runs under ``opentelemetry-instrument`` with otel-replay alone, exporting OTLP to a real
receiver and fixtures to the store. Before the process run had a root span, this was twelve
traces.
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

from examples.otlp_sink import OtlpSink
from examples.standin import StandIn
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, ROOT, subprocess_env
from tests.replay.conftest import _rewrite_ids_and_enums
from tests.replay.test_replay_cli import replay

pytestmark = pytest.mark.subprocess

SCRIPT = Path(__file__).with_name("_concurrent_agent.py")
DEAD = "http://127.0.0.1:9/v1"
RUN_ID = "r_20261125T120000_0ce0ce0c"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The store, the spans the receiver got, an OTLP JSON file of them, and the answers."""
    tmp = tmp_path_factory.mktemp("process-run")
    store = tmp / "store"
    with StandIn(event_delay=0.001) as standin, OtlpSink() as sink:
        env = subprocess_env(
            store,
            OTEL_SERVICE_NAME="concurrent-agent",
            OTEL_TRACES_EXPORTER="otlp,replay",
            OTEL_EXPORTER_OTLP_ENDPOINT=sink.grpc_endpoint,
            OTEL_EXPORTER_OTLP_INSECURE="true",
            OTEL_REPLAY_RUN_ID=RUN_ID,
        )
        program = [sys.executable, str(SCRIPT), str(ROOT), standin.openai_base_url, "threads"]
        done = subprocess.run(
            [str(INSTRUMENT), *program],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        sink.wait_for_spans(13, 10)
        bodies = [r.body for r in sink.requests() if r.signal == "traces"]
        spans = sink.spans()
    otlp = tmp / "run.jsonl"
    lines = (
        json.dumps(_rewrite_ids_and_enums(json_format.MessageToDict(message)))
        for message in map(ExportTraceServiceRequest.FromString, bodies)
    )
    otlp.write_text("".join(line + "\n" for line in lines))
    answers = json.loads(done.stdout.strip().splitlines()[-1])["answers"]
    return {"store": store, "spans": spans, "otlp": otlp, "answers": answers}


def test_the_process_run_is_one_trace_under_its_root_span(recorded: dict[str, Any]) -> None:
    spans = recorded["spans"]
    (root,) = [s for s in spans if s["name"] == "invoke_agent _concurrent_agent.py"]
    steps = [s for s in spans if "replay.step.index" in s["attributes"]]
    assert len(steps) == 12 and len(spans) == 13
    assert {s["trace_id"] for s in spans} == {root["trace_id"]}
    assert {s["parent_span_id"] for s in steps} == {root["span_id"]}
    assert root["parent_span_id"] is None and root["kind"] == "INTERNAL"
    attrs = root["attributes"]
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "_concurrent_agent.py"
    assert attrs["replay.run.id"] == RUN_ID and attrs["replay.mode"] == "record"
    assert root["start_ns"] <= min(s["start_ns"] for s in steps)
    assert root["end_ns"] == max(s["end_ns"] for s in steps)
    with Store.open(recorded["store"], create=False) as store:
        stored = {s["span_id"] for s in store.spans(RUN_ID)}
    assert stored == {s["span_id"] for s in spans}


@pytest.mark.parametrize("source", ["store", "otlp"])
def test_it_replays_from_the_store_and_from_its_otlp(recorded: dict[str, Any], source: str) -> None:
    ref = RUN_ID if source == "store" else str(recorded["otlp"])
    done = replay(recorded["store"], ref, sys.executable, str(SCRIPT), str(ROOT), DEAD, "threads")
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in reversed(done.stdout.splitlines()) if x.startswith('{"answers"'))
    assert json.loads(line)["answers"] == recorded["answers"]
    assert ": identical" in done.stdout and "network attempts: 0" in done.stdout
