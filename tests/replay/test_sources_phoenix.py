"""Runs read from a real Phoenix server (``phoenix://HOST:PORT[/PROJECT]``).

The module starts ``phoenix serve`` from its own venv (``.venv/phoenix``, made by ``make
setup``) on free loopback ports with a scratch working directory, once. The example agent is
recorded into it as a user would: ``opentelemetry-instrument`` with
``OTEL_TRACES_EXPORTER=otlp`` pointed at Phoenix, and no otel-replay store at all. Runs are
then read back through Phoenix's REST API and replayed with the stand-in provider stopped.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from examples.standin import StandIn
from otel_replay.errors import SourceError
from otel_replay.replay.sources import load_run, load_sources
from tests.cli._checks import assert_bad_input, run_cli
from tests.replay.conftest import run_pytest

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[2]
PHOENIX = ROOT / ".venv" / "phoenix" / "bin" / "phoenix"
INSTRUMENT = Path(sys.executable).with_name("opentelemetry-instrument")
CLI = str(Path(sys.executable).with_name("otel-replay"))
AGENT = (sys.executable, str(ROOT / "examples" / "support_agent.py"))
FIRST, SECOND, NIGHT = "r_phoenix_first", "r_phoenix_second", "r_phoenix_night"
NIGHT_PROJECT = "night shift"
DEAD = "http://127.0.0.1:9"
"""Where the replayed agent is sent: nothing listens there, and nothing has to."""


@dataclass(frozen=True)
class Phoenix:
    port: int
    log: Path

    @property
    def ref(self) -> str:
        return f"phoenix://127.0.0.1:{self.port}"

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


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    assert PHOENIX.is_file(), f"Phoenix is missing from {PHOENIX.parent}; run `make setup`"
    home = tmp_path_factory.mktemp("phoenix")
    server = Phoenix(free_port(), home / "phoenix.log")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "PHOENIX_WORKING_DIR": str(home),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(server.port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
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


def _wait_until_up(server: Phoenix, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"phoenix serve exited {proc.returncode}: {server.log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"phoenix serve did not answer in 90 s: {server.log.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def recordings(phoenix: Phoenix) -> dict[str, Recording]:
    """Three runs of the example agent: two in the default project, one in the project "night
    shift" whose streamed answers (about 5 KiB each) are over OTEL_REPLAY_INLINE_LIMIT."""
    runs = [(FIRST, {}), (SECOND, {}), (NIGHT, {"OTEL_REPLAY_INLINE_LIMIT": "4096"})]
    out: dict[str, Recording] = {}
    with StandIn() as standin:
        for run_id, extra in runs:
            before = len(standin.received)
            if run_id == NIGHT:
                extra["OTEL_RESOURCE_ATTRIBUTES"] = f"openinference.project.name={NIGHT_PROJECT}"
            _record(phoenix, standin, run_id, extra)
            bodies = tuple(r.body for r in standin.received[before:])
            out[run_id] = Recording(run_id, bodies)
    for recording in out.values():
        _wait_for_spans(phoenix, recording)
    return out


def _record(phoenix: Phoenix, standin: StandIn, run_id: str, extra: dict[str, str]) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
        "STANDIN_URL": standin.base_url,
        "OTEL_SERVICE_NAME": "support-agent",
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{phoenix.port}",
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "httpx,httpx2,openai,openai_v2,openai_agents",
        "OTEL_REPLAY_RUN_ID": run_id,
        **extra,
    }
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


def _wait_for_spans(phoenix: Phoenix, recording: Recording) -> None:
    """Phoenix stores what it receives a moment later: wait until the run's step spans are
    all there."""
    project = NIGHT_PROJECT if recording.run_id == NIGHT else "default"
    query = urllib.parse.urlencode({"attribute": f'replay.run.id:"{recording.run_id}"'})
    url = f"http://127.0.0.1:{phoenix.port}/v1/projects/{urllib.parse.quote(project)}/spans?{query}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                spans = json.load(answer)["data"]
        except OSError:
            spans = []
        if sum("replay.step.index" in s["attributes"] for s in spans) >= len(recording.bodies):
            return
        time.sleep(0.2)
    pytest.fail(f"Phoenix did not store the spans of {recording.run_id} in 30 s")


def test_runs_read_back_byte_exact(phoenix: Phoenix, recordings: dict[str, Recording]) -> None:
    runs = {loaded.run.run_id: loaded.run for loaded in load_sources(phoenix.ref)}
    assert set(runs) == {FIRST, SECOND}
    for run_id, run in runs.items():
        assert run.source == f"{phoenix.ref}/default"
        assert [s.fidelity for s in run.steps] == ["exact"] * len(recordings[run_id].bodies)
        assert tuple(s.request_body for s in run.steps) == recordings[run_id].bodies
    with pytest.raises(SourceError) as caught:
        load_run(phoenix.ref)
    assert str(caught.value).startswith(f"{phoenix.ref} holds 2 runs; pick one with ")


def test_a_selector_asks_phoenix_for_that_run_only(
    phoenix: Phoenix, recordings: dict[str, Recording]
) -> None:
    (by_run,) = load_sources(f"{phoenix.ref}/default#{SECOND}")
    assert by_run.run.run_id == SECOND
    trace_id = by_run.spans[0]["trace_id"]
    before = len(phoenix.requests())
    by_trace = load_run(f"{phoenix.ref}#{trace_id}")
    assert by_trace.run_id == SECOND
    assert [s.request_body for s in by_trace.steps] == list(recordings[SECOND].bodies)
    asked = phoenix.requests()[before:]
    # The trace, then the run id its spans carry: never the whole project.
    assert len(asked) == 3, asked
    assert f"trace_id={trace_id}" in asked[0]
    assert all("replay.run.id" in line for line in asked[1:])
    # A run the project does not hold: the error lists those it does.
    with pytest.raises(SourceError) as caught:
        load_run(f"{phoenix.ref}#r_nope")
    message = str(caught.value)
    assert message.startswith(f"{phoenix.ref}/default has no run 'r_nope'; it holds: ")
    assert FIRST in message and SECOND in message


def test_replay_from_phoenix_is_identical(
    phoenix: Phoenix, recordings: dict[str, Recording], tmp_path: Path
) -> None:
    done = subprocess.run(
        [CLI, "replay", f"{phoenix.ref}#{FIRST}", "--store", str(tmp_path / "s"), "--", *AGENT],
        env={**os.environ, "STANDIN_URL": DEAD},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    steps = len(recordings[FIRST].bodies)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"fidelity: exact {steps};" in done.stdout
    assert "network attempts: 0" in done.stdout


def test_import_show_diff_and_export(
    phoenix: Phoenix, recordings: dict[str, Recording], tmp_path: Path
) -> None:
    store = str(tmp_path / "store")
    done = run_cli("import", phoenix.ref, "--store", store)
    assert done.exit_code == 0, done.output
    for run_id in (FIRST, SECOND):
        steps = len(recordings[run_id].bodies)
        assert f"{run_id}: imported {steps} steps ({steps} exact, 0 semantic)" in done.stdout
    shown = run_cli("show", FIRST, "--store", store)
    assert shown.exit_code == 0 and "refund_order(" in shown.stdout
    # The same agent on the same conversation: the two runs differ only in tool results
    # made of random ids, which diff reports field by field.
    diffed = run_cli("diff", FIRST, SECOND, "--store", store)
    assert diffed.exit_code in (0, 1) and FIRST in diffed.stdout
    exported = run_cli("export", f"{phoenix.ref}#{FIRST}", str(tmp_path / "bundle"))
    assert exported.exit_code == 0, exported.output
    assert load_run(str(tmp_path / "bundle")).run_id == FIRST


def test_a_step_without_inline_bodies_is_semantic(
    phoenix: Phoenix, recordings: dict[str, Recording], tmp_path: Path
) -> None:
    ref = f"{phoenix.ref}/night%20shift"
    run = load_run(ref)
    assert run.run_id == NIGHT and run.source == f"{phoenix.ref}/{NIGHT_PROJECT}"
    # The streamed answers lost their bytes: they are rebuilt from the GenAI attributes.
    steps = len(recordings[NIGHT].bodies)
    semantic = [s for s in run.steps if s.fidelity == "semantic"]
    assert len(run.steps) == steps and 0 < len(semantic) < steps
    assert {s.step.kind for s in semantic} == {"llm"}
    done = run_cli("import", ref, "--store", str(tmp_path / "store"))
    exact = steps - len(semantic)
    assert f"imported {steps} steps ({exact} exact, {len(semantic)} semantic)" in done.stdout


def test_an_unknown_project_is_one_line(phoenix: Phoenix, tmp_path: Path) -> None:
    ref = f"{phoenix.ref}/nope"
    line = assert_bad_input(run_cli("import", ref, "--store", str(tmp_path / "s")))
    assert line == f"Error: {ref}: no project 'nope' on the server (HTTP 404)"


def test_the_pytest_marker_takes_a_phoenix_run(
    phoenix: Phoenix, recordings: dict[str, Recording], tmp_path: Path
) -> None:
    tests = f"""
    import pytest
    from examples.support_agent import main

    @pytest.mark.otel_replay({phoenix.ref + "#" + FIRST!r})
    def test_support_agent(replay_result, monkeypatch):
        monkeypatch.setenv("STANDIN_URL", {DEAD!r})
        main()
        assert replay_result.identical, replay_result.first_divergence
        assert len(replay_result.steps) == {len(recordings[FIRST].bodies)}
    """
    (tmp_path / "test_agent.py").write_text(textwrap.dedent(tests))
    done = run_pytest(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
