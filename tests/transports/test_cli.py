"""requests and aiohttp programs recorded under ``opentelemetry-instrument`` (OTLP to a real
receiver and fixtures to the store), then replayed by ``otel-replay replay RUN -- python ...``
with the stand-in stopped: same output, no connection, secrets on neither the wire nor disk; a
transport otel-replay does not serve (``urllib.request``) is refused loudly and counted. A
stream cut off mid-answer, over requests, httpx or aiohttp, replays its error after the same
lines and is triaged alike."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from examples.otlp_sink import OtlpSink
from examples.standin import StandIn
from tests.cli._checks import run_cli
from tests.export._support import INSTRUMENT, ROOT, stored_bytes, subprocess_env
from tests.replay.test_replay_cli import replay
from tests.transports._calls import SECRETS
from tests.transports.conftest import DEAD

pytestmark = pytest.mark.subprocess

SCRIPT = Path(__file__).with_name("_calls.py")


def _outputs(stdout: str) -> dict[str, Any]:
    return dict(json.loads(stdout.strip().splitlines()[-1]))


def _run_line(stdout: str) -> dict[str, Any]:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            return dict(json.loads(line))
    raise AssertionError(stdout)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both suites recorded into one store (runs ``r_requests``, ``r_aiohttp``), the
    requests one also exported over OTLP to a receiver; the stand-in stopped afterwards."""
    store = tmp_path_factory.mktemp("transports") / "store"
    out: dict[str, Any] = {"store": store}
    with StandIn(event_delay=0.001) as standin, OtlpSink() as sink:
        for suite in ("requests", "aiohttp"):
            env = subprocess_env(store, OTEL_REPLAY_RUN_ID=f"r_{suite}")
            if suite == "requests":
                env |= {
                    "OTEL_TRACES_EXPORTER": "otlp,replay",
                    "OTEL_EXPORTER_OTLP_ENDPOINT": sink.grpc_endpoint,
                    "OTEL_EXPORTER_OTLP_INSECURE": "true",
                }
            done = subprocess.run(
                [str(INSTRUMENT), sys.executable, str(SCRIPT), str(ROOT), standin.base_url, suite],
                env=env,
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            printed = _outputs(done.stdout)
            assert printed["preloaded"] == []  # the seams wrapped them once imported
            out[suite] = printed["outputs"]
        sink.wait_for_spans(6, 10)
        out["wire"] = sink.raw_bytes()
    return out


@pytest.mark.parametrize("suite", ["requests", "aiohttp"])
def test_the_program_replays_identically_without_the_network(
    recorded: dict[str, Any], suite: str
) -> None:
    store = recorded["store"]
    done = replay(store, f"r_{suite}", sys.executable, str(SCRIPT), str(ROOT), DEAD, suite)
    assert done.returncode == 0, done.stdout + done.stderr
    replayed = _run_line(done.stdout)
    assert replayed["outputs"] == recorded[suite]
    assert replayed["connects"] == replayed["preloaded"] == []
    assert ": identical" in done.stdout
    assert "network attempts: 0" in done.stdout


def test_secrets_reach_neither_the_otlp_wire_nor_the_store(recorded: dict[str, Any]) -> None:
    wire, disk = recorded["wire"], stored_bytes(recorded["store"])
    assert b"api_key=REDACTED" in wire and b"api_key=REDACTED" in disk  # not vacuous
    assert [(s, "wire") for s in SECRETS if s.encode() in wire] == []
    assert [(s, "disk") for s in SECRETS if s.encode() in disk] == []


def test_a_transport_we_do_not_serve_is_refused_and_counted(recorded: dict[str, Any]) -> None:
    store = recorded["store"]
    done = replay(store, "r_requests", sys.executable, str(SCRIPT), str(ROOT), DEAD, "urllib")
    replayed = _run_line(done.stdout)
    assert replayed["outputs"].startswith("refused: URLError")
    assert "refused network access to 127.0.0.1:9" in replayed["outputs"]
    assert replayed["connects"] == []
    assert done.returncode == 1, done.stdout + done.stderr
    assert "network attempts: 1" in done.stdout


CUT_AGENT = Path(__file__).with_name("_cut_agent.py")
TRANSPORTS = ("requests", "httpx", "aiohttp")
RAISED = {
    "requests": "requests.exceptions.ChunkedEncodingError",
    "httpx": "httpx.RemoteProtocolError",
    "aiohttp": "aiohttp.client_exceptions.ClientPayloadError",
}


@pytest.fixture(scope="module")
def cut(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A stream the stand-in cuts off, read over each transport, recorded into one store
    (runs ``r_cut_<transport>``): what each program printed before its error ended it."""
    store = tmp_path_factory.mktemp("cut") / "store"
    out: dict[str, Any] = {"store": store}
    with StandIn(event_delay=0.001) as standin:
        for transport in TRANSPORTS:
            done = subprocess.run(
                [str(INSTRUMENT), sys.executable, str(CUT_AGENT), standin.base_url, transport],
                env=subprocess_env(store, OTEL_REPLAY_RUN_ID=f"r_cut_{transport}"),
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode == 1 and RAISED[transport] in done.stderr, done.stderr
            assert done.stdout.split(), done.stderr  # the cut came after some lines
            out[transport] = done.stdout
    return out


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_stream_cut_off_replays_its_error_after_the_same_lines(
    cut: dict[str, Any], transport: str
) -> None:
    done = replay(
        cut["store"], f"r_cut_{transport}", sys.executable, str(CUT_AGENT), DEAD, transport
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.startswith(cut[transport])  # the same lines, then the same error
    assert f"the agent raised {RAISED[transport]}" in done.stdout
    assert ": identical steps, but the agent failed" in done.stdout


def test_triage_labels_a_stream_cut_off_alike_over_every_transport(cut: dict[str, Any]) -> None:
    result = run_cli("triage", "--json", "--store", str(cut["store"]))
    assert result.exit_code == 0, result.output
    runs = {run["run_id"]: run for run in json.loads(result.stdout)["runs"]}
    labels = {t: runs[f"r_cut_{t}"]["label"] or {} for t in TRANSPORTS}
    assert {
        t: (x.get("category"), x.get("severity"), x.get("rule")) for t, x in labels.items()
    } == {t: ("environment_drift", "critical", "connection") for t in TRANSPORTS}
    assert all(
        x["reason"].startswith("step 0: the connection dropped in the middle of")
        for x in labels.values()
    )
