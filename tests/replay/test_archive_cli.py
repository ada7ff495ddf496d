"""The example agent recorded as a team records it: spans over OTLP to a Collector that keeps
them with its file exporter (zstd, rotated). Every verb that takes a RUN takes the archive
directory: ``replay``, ``show``, ``diff``, ``export``, ``import`` and the pytest marker.

The Collector is played by ``examples/otlp_sink.py`` (a real OTLP receiver) and the file
exporter's writing by ``_collector_files`` (each export request the SDK sent, as one record).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
import zstandard
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from examples.otlp_sink import OtlpSink
from examples.standin import StandIn
from otel_replay.replay.sources import load_run
from tests.cli._checks import assert_bad_input, run_cli
from tests.replay._collector_files import backup_name
from tests.replay.conftest import run_pytest
from tests.replay.test_replay_cli import AGENT, _record, replay
from tests.replay.test_sources_backends import (
    PHOENIX_SPAN,
    Backend,
    backend,  # noqa: F401 (the fixture, used by name)
    phoenix_page,
)

pytestmark = pytest.mark.subprocess

RUN = "r_archived"


def _archive(folder: Path, requests: list[bytes]) -> None:
    """The export requests as ``format: proto``, ``compression: zstd`` with the
    nativeCompression gate and ``rotation``: one zstd frame per write, two requests a file."""
    folder.mkdir()
    frames = [zstandard.ZstdCompressor().compress(len(r).to_bytes(4, "big") + r) for r in requests]
    files = [frames[i : i + 2] for i in range(0, len(frames), 2)]
    for number, written in enumerate(files):
        live = number == len(files) - 1
        stamp = f"2026-11-21T09-0{number}-00.000"
        name = "traces.pb.zst" if live else backup_name("traces.pb.zst", stamp, "size")
        (folder / name).write_bytes(b"".join(written))


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str, str]:
    """The support agent recorded into a store and, through OTLP, into an archive in
    several files; returns the archive, the store, the stand-in's URL and what it printed."""
    root = tmp_path_factory.mktemp("archived")
    with StandIn(event_delay=0.001) as standin, OtlpSink() as sink:
        done = _record(
            root / "store",
            RUN,
            [str(AGENT)],
            STANDIN_URL=standin.base_url,
            OTEL_TRACES_EXPORTER="replay,otlp",
            OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/protobuf",
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{sink.http_endpoint}/v1/traces",
            OTEL_BSP_MAX_EXPORT_BATCH_SIZE="3",
            OTEL_BSP_SCHEDULE_DELAY="10",
        )
        url = standin.base_url
        requests = [r.body for r in sink.requests() if r.signal == "traces"]
    assert len(requests) >= 4  # the run's spans are spread over several files
    for body in requests:
        ExportTraceServiceRequest.FromString(body)
    _archive(root / "archive", requests)
    return root / "archive", root / "store", url, done.stdout


def test_the_agent_replays_from_the_archive(archived: tuple[Path, Path, str, str]) -> None:
    archive, store, _, recorded_output = archived
    assert len(list(archive.iterdir())) >= 2
    done = replay(store, f"{archive}#{RUN}", sys.executable, str(AGENT))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(recorded_output)
    assert "identical" in done.stdout[len(recorded_output) :]
    assert "fidelity: exact 9" in done.stdout
    assert "Traceback" not in done.stderr


def test_show_diff_export_and_import_take_the_archive(
    archived: tuple[Path, Path, str, str], tmp_path: Path
) -> None:
    archive, store, _, _ = archived
    diff = run_cli("diff", f"{archive}#{RUN}", RUN, "--store", str(store))
    assert diff.exit_code == 0, diff.output
    assert "identical" in diff.stdout
    shown = run_cli("show", f"{archive}#{RUN}", "--store", str(store), "--json")
    assert shown.exit_code == 0, shown.output
    from_store = run_cli("show", RUN, "--store", str(store), "--json")
    steps = [(s["index"], s["kind"]) for s in json.loads(shown.stdout)["steps"]]
    assert steps == [(s["index"], s["kind"]) for s in json.loads(from_store.stdout)["steps"]]
    assert len(steps) == 9
    bundle = tmp_path / "golden"
    exported = run_cli("export", f"{archive}#{RUN}", str(bundle), "--store", str(store))
    assert exported.exit_code == 0, exported.output
    assert [s.request_body for s in load_run(str(bundle)).steps] == [
        s.request_body for s in load_run(RUN, store=str(store)).steps
    ]
    target = tmp_path / "imported"
    imported = run_cli("import", str(archive), "--store", str(target))
    assert imported.exit_code == 0, imported.output
    assert imported.stdout.splitlines()[-1].endswith(f"1 run imported, 0 completed into {target}")


MARKED = """
import pytest
from examples import support_agent

@pytest.mark.otel_replay({source!r})
def test_the_agent(replay_result, monkeypatch):
    monkeypatch.setenv("STANDIN_URL", {url!r})
    support_agent.main()
    assert replay_result.identical, replay_result.first_divergence
    assert len(replay_result.run.steps) == 9
"""


def test_the_pytest_marker_takes_the_archive(
    archived: tuple[Path, Path, str, str], tmp_path: Path
) -> None:
    archive, _, url, _ = archived
    (tmp_path / "test_archived.py").write_text(
        textwrap.dedent(MARKED.format(source=f"{archive}#{RUN}", url=url))
    )
    session = run_pytest(tmp_path)
    assert "PASSED test_archived.py::test_the_agent" in session.stdout, session.stdout


def test_a_phoenix_project_with_a_run_that_cannot_be_rebuilt(
    backend: Backend,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    """The same as an archive's: a Phoenix project whose one run cannot be rebuilt lists
    both runs, and ``import`` imports the other and names the bad one on a line of its own."""
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": "hi"}]}]
    good = {
        **PHOENIX_SPAN,
        "attributes": {
            **PHOENIX_SPAN["attributes"],
            "replay.run.id": "r_ok",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.output.messages": json.dumps(answer),
        },
    }
    bad = {
        **PHOENIX_SPAN,
        "name": "GET",
        "context": {"trace_id": "6b8aa5a2d2c872e8321cf37308d69df2", "span_id": "151581bf3cb55c13"},
        "span_kind": "UNKNOWN",
        "attributes": {
            "replay.run.id": "r_bad",
            "replay.step.index": 0,
            "replay.step.kind": "http",
            "http.request.method": "GET",
            "url.full": "http://files.test/big",
            "http.response.status_code": 200,
        },
    }
    ref = phoenix_page(backend, good, bad)
    line = assert_bad_input(run_cli("show", ref), "holds 2 runs", "r_ok", "r_bad")
    assert "1 of them cannot be rebuilt" in line and "no recorded response body" in line
    assert run_cli("show", f"{ref}#r_ok").exit_code == 0
    result = run_cli("import", ref, "--store", str(tmp_path / "store"))
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("otel-replay: not imported: ") and "r_bad" in result.stderr
    assert result.stdout.splitlines()[-1].startswith("1 run imported into")
