"""A real Phoenix server for the tests, and the example agent recorded into it.

``phoenix serve`` runs from its own venv (``.venv/phoenix``, made by ``make setup``) on free
loopback ports with a scratch working directory. The agent is recorded as a user would:
``opentelemetry-instrument`` with ``OTEL_TRACES_EXPORTER=otlp`` pointed at Phoenix, and no
otel-replay store at all.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from examples.standin import StandIn
from tests.export._support import instrumentations

ROOT = Path(__file__).resolve().parents[2]
PHOENIX = ROOT / ".venv" / "phoenix" / "bin" / "phoenix"
INSTRUMENT = Path(sys.executable).with_name("opentelemetry-instrument")
AGENT = (sys.executable, str(ROOT / "examples" / "support_agent.py"))


@dataclass(frozen=True)
class Phoenix:
    port: int
    log: Path

    @property
    def ref(self) -> str:
        return f"phoenix://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self) -> list[str]:
        """The request lines Phoenix logged, oldest first."""
        return [line for line in self.log.read_text().splitlines() if '"GET /v1/' in line]


@dataclass(frozen=True)
class Recording:
    """A run recorded into Phoenix, and the request bodies the stand-in got, in order."""

    run_id: str
    bodies: tuple[bytes, ...]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def serve(home: Path, **settings: str) -> Iterator[Phoenix]:
    """``phoenix serve`` in ``home``, with these ``PHOENIX_*`` ``settings``, until the end."""
    assert PHOENIX.is_file(), f"Phoenix is missing from {PHOENIX.parent}; run `make setup`"
    server = Phoenix(free_port(), home / "phoenix.log")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "PHOENIX_WORKING_DIR": str(home),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(server.port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        **settings,
    }
    with server.log.open("wb") as log:
        proc = subprocess.Popen(
            [str(PHOENIX), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        _wait_until_up(server, proc)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


START_S = 240
"""How long Phoenix may take to answer: ~15 s idle, past 90 s on a machine at load 10."""


def _wait_until_up(server: Phoenix, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"phoenix serve exited {proc.returncode}: {server.log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{server.url}/healthz", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    log = server.log.read_text()[-2000:]
    pytest.fail(f"phoenix serve did not answer in {START_S} s: {log}")


def record(
    phoenix: Phoenix,
    standin: StandIn,
    run_id: str,
    extra: dict[str, str] | None = None,
    key: str | None = None,
) -> Recording:
    """Record one run of the example agent into ``phoenix`` (with the API ``key`` when it
    asks for one), and wait until Phoenix holds its step spans."""
    before = len(standin.received)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))},
        "STANDIN_URL": standin.base_url,
        "OTEL_SERVICE_NAME": "support-agent",
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url,
        **instrumentations(),
        "OTEL_REPLAY_RUN_ID": run_id,
        **(extra or {}),
    }
    if key:
        env["OTEL_EXPORTER_OTLP_HEADERS"] = f"authorization=Bearer%20{key}"
    done = subprocess.run(
        [str(INSTRUMENT), *AGENT],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    recording = Recording(run_id, tuple(r.body for r in standin.received[before:]))
    project = (extra or {}).get("OTEL_RESOURCE_ATTRIBUTES", "=default").partition("=")[2]
    _wait_for_spans(phoenix, recording, project, key)
    return recording


def _wait_for_spans(phoenix: Phoenix, recording: Recording, project: str, key: str | None) -> None:
    """Phoenix stores what it receives a moment later: wait until the run's step spans are
    all there."""
    query = urllib.parse.urlencode({"attribute": f'replay.run.id:"{recording.run_id}"'})
    url = f"{phoenix.url}/v1/projects/{urllib.parse.quote(project)}/spans?{query}"
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(
                urllib.request.Request(url, headers=headers), timeout=5
            ) as answer:
                spans = json.load(answer)["data"]
        except OSError:
            spans = []
        if sum("replay.step.index" in s["attributes"] for s in spans) >= len(recording.bodies):
            return
        time.sleep(0.2)
    pytest.fail(f"Phoenix did not store the spans of {recording.run_id} in 30 s")
