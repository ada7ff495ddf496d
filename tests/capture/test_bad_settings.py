"""A bad ``OTEL_REPLAY_*`` value must not break OpenTelemetry.

The example agent runs under ``opentelemetry-instrument`` with ``OTEL_TRACES_EXPORTER=otlp,
replay`` and the official instrumentations of what it uses (openai, httpx), against the
stand-in provider and a real OTLP receiver, with one setting spoiled (every setting is checked
in this process, two end to end). otel-replay says so in one line naming the variable and stays
off; the user's spans (the agent's, the official instrumentations') still reach the receiver;
nothing is recorded. Asked to replay, the process refuses to run at all.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

from examples.otlp_sink import OtlpSink
from examples.standin import StandIn
from otel_replay import ConfigError, ReplayInstrumentor, ReplaySpanExporter, settings
from tests.capture.test_auto_instrumentation import (
    AGENT,
    AGENT_SPAN,
    INSTRUMENT,
    ROOT,
    agent_env,
)
from tests.export._support import instrumentations

OFFICIAL = ("openai", "httpx", "httpx2")
"""The instrumentations of what the example agent uses (the openai SDK, on httpx or httpx2)."""

BAD = {
    "OTEL_REPLAY_MODE": "bogus",
    "OTEL_REPLAY_INLINE_LIMIT": "lots",
    "OTEL_REPLAY_REDACT": "(",
    "OTEL_REPLAY_FLUSH_TIMEOUT_MS": "1.5s",
    "OTEL_REPLAY_HANDLE_SIGTERM": "perhaps",
    "OTEL_REPLAY_RETAIN_OK_DAYS": "forever",
    "OTEL_REPLAY_RETAIN_ERROR_DAYS": "-3",
    "OTEL_REPLAY_GC_GRACE_S": "an hour",
    "OTEL_REPLAY_SAMPLE_OK": "1.5",
    "OTEL_REPLAY_STRICT": "maybe",
    "OTEL_REPLAY_TIMING": "slow",
    "OTEL_REPLAY_CLOCK": "frozen",
    "OTEL_REPLAY_LIVE_TOOLS": "write",
    "OTEL_REPLAY_SOURCE_MAX_BYTES": "0",
    "OTEL_REPLAY_IGNORE": "*",
    "OTEL_REPLAY_RUN_ID": "../../escape",
}


def test_every_setting_that_can_be_bad_is_covered() -> None:
    failing = set()
    for setting in (*settings.SETTINGS, *settings.CLI_CHANNEL):
        try:
            setting.parse("bad value (")
        except Exception:
            failing.add(setting.name)
    assert failing == set(BAD)


@pytest.fixture
def sink() -> Iterator[OtlpSink]:
    with OtlpSink() as receiver:
        yield receiver


def _run(
    standin: StandIn, tmp_path: Path, env: dict[str, str], sink: OtlpSink | None = None
) -> subprocess.CompletedProcess[str]:
    """The agent beside the official instrumentations of its SDK and transport, its traces to
    ``otlp,replay``."""
    quiet = {"OTEL_METRICS_EXPORTER": "none", **instrumentations(*OFFICIAL), **env}
    return subprocess.run(
        [str(INSTRUMENT), sys.executable, AGENT],
        cwd=ROOT,
        env=agent_env(standin, sink, tmp_path, quiet, traces="otlp,replay"),
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_setting_turns_the_instrumentor_and_the_exporter_off(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path, name: str
) -> None:
    """Every setting, in this process: one line naming it, nothing wrapped, nothing stored."""
    monkeypatch.setattr(settings, "_turned_off", set())  # said once per process
    monkeypatch.setenv(name, BAD[name])
    monkeypatch.setenv("OTEL_REPLAY_STORE", str(tmp_path / "store"))
    if name != "OTEL_REPLAY_MODE":
        monkeypatch.setenv("OTEL_REPLAY_MODE", "record")
    send = httpx.Client._send_single_request
    instrumentor = ReplayInstrumentor()
    with caplog.at_level(logging.ERROR, logger="otel_replay"):
        instrumentor.instrument()
        try:
            assert instrumentor.recorder is None
            assert httpx.Client._send_single_request is send  # nothing wrapped
            exporter = ReplaySpanExporter()
            assert exporter.export([]) == SpanExportResult.SUCCESS
            exporter.shutdown()
        finally:
            instrumentor.uninstrument()
    said = [r.getMessage() for r in caplog.records if "otel-replay" in r.getMessage()]
    assert len(said) == 1, said  # once, though both the instrumentor and the exporter saw it
    assert said[0].startswith(f"otel-replay: {name}={BAD[name]!r} is invalid: ")
    assert said[0].endswith("; otel-replay is off in this process")
    with pytest.raises(ConfigError, match=f"^{name}="):
        settings.load()
    assert not (tmp_path / "store").exists()  # nothing recorded


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("name", "protocol"), [("OTEL_REPLAY_MODE", "grpc"), ("OTEL_REPLAY_REDACT", "http/protobuf")]
)
def test_a_bad_setting_turns_otel_replay_off_and_the_spans_still_arrive(
    standin: StandIn, sink: OtlpSink, tmp_path: Path, name: str, protocol: str
) -> None:
    proc = _run(standin, tmp_path, {name: BAD[name], "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}, sink)
    assert proc.returncode == 0, proc.stderr
    assert "agent> " in proc.stdout  # the agent did its work
    said = [line for line in proc.stderr.splitlines() if "otel-replay" in line]
    assert said == [f"otel-replay: {name}={BAD[name]!r} is invalid: {said[0].split(': ', 2)[2]}"]
    assert said[0].endswith("; otel-replay is off in this process")
    assert "Traceback" not in proc.stderr
    sink.wait_for_spans(lambda spans: any(s["name"] == AGENT_SPAN for s in spans), 10)
    spans = sink.spans()
    chats = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "chat"]
    assert chats, [s["name"] for s in spans]  # the official openai instrumentation's spans
    assert not [s for s in spans if any(k.startswith("replay.") for k in s["attributes"])]
    assert not (tmp_path / "store" / "runs").exists()  # nothing recorded


@pytest.mark.subprocess
def test_asked_to_replay_with_a_bad_setting_the_app_does_not_run(
    standin: StandIn, tmp_path: Path
) -> None:
    proc = _run(
        standin,
        tmp_path,
        {"OTEL_REPLAY_MODE": "replay", "OTEL_REPLAY_RUN": "r_x", "OTEL_REPLAY_STRICT": "maybe"},
    )
    assert proc.returncode == 2
    assert "agent> " not in proc.stdout and not standin.received
    assert proc.stderr.strip().splitlines() == [
        "otel-replay: cannot replay: OTEL_REPLAY_STRICT='maybe' is invalid: expected true or false"
    ]


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``otel-replay ARGS`` with ``env`` added to this process's environment."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "otel-replay"), *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.subprocess
def test_the_cli_refuses_a_bad_setting_on_one_line(tmp_path: Path) -> None:
    proc = _cli("runs", "--store", str(tmp_path), OTEL_REPLAY_RETAIN_OK_DAYS="forever")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "OTEL_REPLAY_RETAIN_OK_DAYS" in proc.stderr


@pytest.mark.subprocess
def test_replay_refuses_a_bad_setting_of_the_program_before_running_it(tmp_path: Path) -> None:
    """A setting the replayed program would read (the recorded clock's) is checked by the
    ``replay`` verb first: one line naming it, exit 2, the program never started (once: the
    program died on it and the report blamed the agent, exit 3)."""
    ran = tmp_path / "ran"
    program = [sys.executable, "-c", f"open({str(ran)!r}, 'w')"]
    store = str(tmp_path / "store")
    proc = _cli("replay", "r_x", "--store", store, "--", *program, OTEL_REPLAY_CLOCK="bogus")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "Error: OTEL_REPLAY_CLOCK='bogus' is invalid: " + proc.stderr.split("invalid: ")[1].strip()
    ]
    assert not ran.exists()


@pytest.mark.subprocess
def test_a_ci_commit_that_is_not_text_is_passed_over_and_the_run_recorded(
    standin: StandIn, tmp_path: Path
) -> None:
    """A CI system's commit variable holding bytes that are not UTF-8 once became the run's
    commit, which the store could not write: the whole run was lost, in two lines about a
    ``UnicodeEncodeError``. It is passed over for the next variable set."""
    commits = {"GITHUB_SHA": "\udcff\udcfe", "CI_COMMIT_SHA": "0f3c9a1d"}
    proc = _run(standin, tmp_path, {"OTEL_TRACES_EXPORTER": "replay", **commits})
    assert proc.returncode == 0, proc.stderr
    assert "agent> " in proc.stdout
    assert "otel-replay" not in proc.stderr, proc.stderr
    listed = _cli("runs", "--json", "--store", str(tmp_path / "store"))
    assert listed.returncode == 0, listed.stderr
    assert [run["commit"] for run in json.loads(listed.stdout)] == ["0f3c9a1d"]


@pytest.mark.subprocess
def test_a_store_under_a_home_that_does_not_exist_leaves_opentelemetry_running(
    standin: StandIn, sink: OtlpSink, tmp_path: Path
) -> None:
    """``OTEL_REPLAY_STORE=~user/...`` for a user with no home (a container's) made the
    exporter's constructor raise: "Failed to auto initialize OpenTelemetry", two tracebacks,
    and none of the user's spans reached their backend."""
    where = "~otel-replay-no-such-user/store"
    proc = _run(standin, tmp_path, {"OTEL_REPLAY_STORE": where}, sink)
    assert proc.returncode == 0, proc.stderr
    assert "agent> " in proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "otel-replay" in line]
    assert said == [
        f"otel-replay: OTEL_REPLAY_STORE={where!r} is invalid: ~otel-replay-no-such-user names "
        "no home directory; otel-replay is off in this process"
    ]
    sink.wait_for_spans(lambda spans: any(s["name"] == AGENT_SPAN for s in spans), 10)
