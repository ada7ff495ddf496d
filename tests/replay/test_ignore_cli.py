"""Background traffic end to end: real SDKs that upload their own telemetry, recorded under
``opentelemetry-instrument`` against the stand-in, replayed by ``otel-replay replay`` with the
stand-in stopped. Their uploads are no steps; the replay answers them, is identical (exit 0)
with no network attempt, lists them once, and the SDKs print no traceback. The OTLP/HTTP span
exporter (``requests`` underneath) is never recorded and its export still arrives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from examples.otlp_sink import OtlpSink
from examples.standin import StandIn
from otel_replay.replay.sources import load_run
from tests.export._support import INSTRUMENT, ROOT, subprocess_env
from tests.replay.test_replay_cli import replay

pytestmark = pytest.mark.subprocess

SCRIPT = Path(__file__).with_name("_background_agent.py")
GONE = "http://127.0.0.1:9"  # nothing listens there; strict replay never asks
KEY = "sk-standin-not-a-secret"
LANGSMITH = {"LANGSMITH_TRACING": "true", "LANGSMITH_API_KEY": "lsv2-standin-not-a-secret"}


def _record(
    store: Path, mode: str, standin: StandIn, **env: str
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(INSTRUMENT), sys.executable, str(SCRIPT), mode],
        env=subprocess_env(
            store, OTEL_REPLAY_RUN_ID=f"r_{mode}", STANDIN_URL=standin.base_url, **env
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _uploads(stdout: str) -> list[Any]:
    for line in reversed(stdout.splitlines()):
        if line.startswith('{"uploads"'):
            return list(json.loads(line)["uploads"])
    raise AssertionError(stdout)


def _answers(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("agent> ")]


def _quiet(done: subprocess.CompletedProcess[str]) -> None:
    """No traceback, and none of the Agents SDK's upload warnings."""
    for text in (done.stdout, done.stderr):
        assert "Traceback" not in text and "[non-fatal]" not in text, text


@pytest.fixture(scope="module")
def agents_sdk(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The Agents SDK agent recorded, its own tracing uploading to the stand-in."""
    store = tmp_path_factory.mktemp("agents") / "store"
    with StandIn(event_delay=0.001) as standin:
        done = _record(store, "agents", standin, OPENAI_API_KEY=KEY)
        received = [(r.method, r.path) for r in standin.received]
    assert _uploads(done.stdout) == [204]  # the SDK's trace upload went out, as usual
    assert ("POST", "/v1/traces/ingest") in received
    _quiet(done)
    return store, done.stdout


def test_the_agents_sdk_trace_upload_is_not_a_step(agents_sdk: tuple[Path, str]) -> None:
    run = load_run("r_agents", store=str(agents_sdk[0]))
    assert [s.endpoint for s in run.steps] == [
        "openai.chat_completions",
        "tool:lookup_order",
        "openai.chat_completions",
    ]
    assert not [s for s in run.steps if "traces/ingest" in s.step.url]


def test_the_agents_sdk_agent_replays_identically_with_its_upload_answered(
    agents_sdk: tuple[Path, str],
) -> None:
    store, recorded = agents_sdk
    done = replay(store, "r_agents", sys.executable, str(SCRIPT), "agents", STANDIN_URL=GONE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _answers(done.stdout) == _answers(recorded)
    assert _uploads(done.stdout) == [200]  # otel-replay's answer: the batch counts delivered
    assert ": identical" in done.stdout and "network attempts: 0" in done.stdout
    listed = [line for line in done.stdout.splitlines() if "ignored background calls" in line]
    assert listed == ["ignored background calls (OTEL_REPLAY_IGNORE): 127.0.0.1:9/v1/traces/ingest"]
    _quiet(done)


def test_the_json_report_carries_the_ignored_calls(agents_sdk: tuple[Path, str]) -> None:
    store, _ = agents_sdk
    done = replay(
        store, "r_agents", sys.executable, str(SCRIPT), "agents", flags=["--json"], STANDIN_URL=GONE
    )
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document["identical"] is True and document["network_attempts"] == []
    assert document["ignored"] == {"127.0.0.1:9/v1/traces/ingest": 1}
    assert all(step["recorded"] is not None for step in document["steps"])


def test_an_upload_recorded_as_a_step_is_set_aside(tmp_path: Path) -> None:
    """A recording made with no rule holds the SDK's upload as a step; the CLI replays it
    with the default rules as if it were not there."""
    store = tmp_path / "store"
    with StandIn(event_delay=0.001) as standin:
        done = _record(store, "agents", standin, OPENAI_API_KEY=KEY, OTEL_REPLAY_IGNORE="-defaults")
    steps = load_run("r_agents", store=str(store)).steps
    assert [s.endpoint for s in steps].count("POST /v1/traces/ingest") == 1
    again = replay(store, "r_agents", sys.executable, str(SCRIPT), "agents", STANDIN_URL=GONE)
    assert again.returncode == 0, again.stdout + again.stderr
    assert _answers(again.stdout) == _answers(done.stdout)
    assert ": identical" in again.stdout and "network attempts: 0" in again.stdout
    assert "never requested" not in again.stdout
    assert (
        "ignored background calls (OTEL_REPLAY_IGNORE): 127.0.0.1:9/v1/traces/ingest"
        in again.stdout
    )


def test_langsmith_runs_are_not_steps_and_replay_identically(tmp_path: Path) -> None:
    """The real LangSmith client against a self-hosted endpoint (the stand-in): its uploads
    are ignored by default; its ``GET /info`` by the user's rule."""
    store = tmp_path / "store"
    rule = {"OTEL_REPLAY_IGNORE": "127.0.0.1/info"}
    with StandIn(event_delay=0.001) as standin:
        ends = {"LANGSMITH_ENDPOINT": standin.base_url}
        done = _record(store, "langsmith", standin, **LANGSMITH, **ends, **rule)
        received = {(r.method, r.path) for r in standin.received}
    assert {("GET", "/info"), ("POST", "/runs/multipart")} <= received  # they went out
    _quiet(done)
    run = load_run("r_langsmith", store=str(store))
    assert [s.endpoint for s in run.steps] == ["openai.chat_completions"]

    gone = {"STANDIN_URL": GONE, "LANGSMITH_ENDPOINT": GONE}
    again = replay(
        store, "r_langsmith", sys.executable, str(SCRIPT), "langsmith", **LANGSMITH, **gone, **rule
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert _answers(again.stdout) == _answers(done.stdout)
    assert ": identical" in again.stdout and "network attempts: 0" in again.stdout
    (listed,) = [line for line in again.stdout.splitlines() if "ignored background" in line]
    assert listed.startswith("ignored background calls (OTEL_REPLAY_IGNORE): 127.0.0.1:9/info, ")
    assert "127.0.0.1:9/runs/multipart" in listed
    _quiet(again)


@pytest.mark.parametrize("rules", ["", "-defaults"])
def test_the_otlp_http_exporter_is_never_a_step_and_its_export_arrives(
    tmp_path: Path, rules: str
) -> None:
    """``OTEL_TRACES_EXPORTER=otlp,replay`` over ``http/protobuf`` (``requests`` and urllib3,
    both captured): the exporter sends with instrumentation suppressed, so its posts are no
    steps even with every ignore rule dropped, and the spans reach the receiver."""
    store = tmp_path / "store"
    with StandIn(event_delay=0.001) as standin, OtlpSink() as sink:
        otlp = {
            "OTEL_TRACES_EXPORTER": "otlp,replay",
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_METRIC_EXPORT_INTERVAL": "100",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_ENDPOINT": sink.http_endpoint,
            "OTEL_REPLAY_IGNORE": rules,
        }
        done = _record(store, "requests", standin, **otlp)
        spans = sink.wait_for_spans(
            lambda got: any(s["name"] == "chat gpt-4o-mini" for s in got), 10
        )
        received = [(r.method, r.path) for r in standin.received]
    _quiet(done)
    assert received == [("POST", "/v1/chat/completions")]
    chat = next(s for s in spans if s["name"] == "chat gpt-4o-mini")
    assert chat["attributes"]["replay.step.index"] == 0
    assert {r.signal for r in sink.requests()} >= {"traces", "metrics"}
    run = load_run("r_requests", store=str(store))
    assert [(s.step.method, s.endpoint) for s in run.steps] == [("POST", "openai.chat_completions")]

    again = replay(store, "r_requests", sys.executable, str(SCRIPT), "requests", STANDIN_URL=GONE)
    assert again.returncode == 0, again.stdout + again.stderr
    assert ": identical" in again.stdout and "network attempts: 0" in again.stdout


def test_a_bad_rule_stops_the_replay_on_one_line(tmp_path: Path) -> None:
    done = replay(tmp_path, "r_x", sys.executable, str(SCRIPT), "requests", OTEL_REPLAY_IGNORE="*")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "Error: OTEL_REPLAY_IGNORE='*' is invalid: entry '*' would ignore every call: name a "
        "host or a path"
    ]
