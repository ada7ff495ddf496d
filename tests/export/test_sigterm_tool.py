"""A tool step in flight when SIGTERM ends the process is a step of the run: its arguments
(redacted), an error of type SIGTERM, its span sent over OTLP, the run's root an error.

Before, the hung tool's step was lost: the run held only the tools that had returned, and
its ``execute_tool`` span, never ended, reached neither the store nor the backend. Real
subprocesses: a smolagents program under ``opentelemetry-instrument`` exporting OTLP over
HTTP to a real receiver and to the replay exporter; then the ``otel-replay`` CLI replays it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from examples.otlp_sink import OtlpSink
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, ROOT, subprocess_env

pytestmark = pytest.mark.subprocess

AGENT = Path(__file__).with_name("_sigterm_tool_agent.py")
CLI = Path(sys.executable).parent / "otel-replay"
RUN_ID = "r_sigterm_tool"
KEY = b"pk_live_0123456789abcdefXYZ"


def test_a_tool_step_in_flight_is_recorded_cut_off(tmp_path: Path) -> None:
    store_path = tmp_path / "store"
    with OtlpSink() as sink:
        env = subprocess_env(
            store_path,
            OTEL_TRACES_EXPORTER="otlp,replay",
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            OTEL_EXPORTER_OTLP_ENDPOINT=sink.http_endpoint,
            OTEL_REPLAY_RUN_ID=RUN_ID,
        )
        proc = subprocess.Popen(
            [str(INSTRUMENT), sys.executable, str(AGENT)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        seen = [proc.stdout.readline(), proc.stdout.readline()]
        assert seen == ["shipped\n", "refunding\n"]
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGTERM)  # twice: the second is absorbed
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGTERM, err
        sent = sink.spans()

    with Store.open(store_path, create=False) as store:
        steps = store.steps(RUN_ID)
        bodies = [(store.request_body(s), store.response_body(s)) for s in steps]
        assert [p for p in store.verify() if p.damage] == []
    assert [(s.index, s.kind, s.error_type) for s in steps] == [
        (0, "tool", None),
        (1, "tool", "SIGTERM"),
    ]
    arguments, answer = bodies[1]
    assert json.loads(arguments) == {"order_id": "A-1", "api_key": "REDACTED"}
    assert json.loads(answer) == {
        "type": "SIGTERM",
        "message": "the process was cut off by SIGTERM while the tool ran",
    }
    # The key is nowhere: not in the store's files, not in what was sent.
    for path in store_path.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_bytes(), path
    assert KEY.decode() not in json.dumps(sent)
    (tool,) = [s for s in sent if s["name"] == "execute_tool refund_order"]
    (root,) = [s for s in sent if s["parent_span_id"] is None]
    assert tool["status"]["code"] == "ERROR"
    assert tool["attributes"]["error.type"] == "SIGTERM"
    assert tool["attributes"]["replay.step.index"] == 1
    assert tool["parent_span_id"] == root["span_id"]
    assert root["attributes"]["error.type"] == "SIGTERM"  # a step was cut off

    # Replayed, the program meets the cut-off where the recording ended, without waiting.
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    program = [sys.executable, str(AGENT)]
    done = subprocess.run(
        [str(CLI), "replay", RUN_ID, "--store", str(store_path), "--", *program],
        env=clean | {"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.startswith("shipped\nreplay of run r_sigterm_tool"), done.stdout
    assert "refunding" not in done.stdout  # the hung body did not run again
    assert "identical steps, but the agent failed" in done.stdout
    assert "SIGTERM: the process was cut off by SIGTERM while the tool ran" in done.stdout
    assert "2 requests, 2 served from 2 recorded steps" in done.stdout
    assert done.returncode == 3, done.stdout + done.stderr
