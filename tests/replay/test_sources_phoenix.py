"""Runs read from a real Phoenix server (``phoenix://HOST:PORT[/PROJECT]``) with
authentication on, the API key in ``PHOENIX_API_KEY`` (Phoenix's own variable, which its
clients read).

The module starts one Phoenix (:mod:`tests.replay._phoenix`) with ``PHOENIX_ENABLE_AUTH=true``,
a JWT secret and an admin secret, and makes a system API key through its REST API (``POST
/v1/system/api_keys`` with the admin secret as bearer token: how a deployment gets a key
without the web UI). The example agent is recorded into it as a user would, with the key on
the exporter (``OTEL_EXPORTER_OTLP_HEADERS``) and no otel-replay store at all. Runs are then
read back through Phoenix's REST API and replayed with the stand-in provider stopped.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from examples.standin import StandIn
from otel_replay.errors import SourceError
from otel_replay.replay.sources import load_run, load_sources
from tests.cli._checks import assert_bad_input, run_cli
from tests.replay._phoenix import AGENT, Phoenix, Recording, record, serve
from tests.replay.conftest import run_pytest

pytestmark = pytest.mark.subprocess

CLI = str(Path(sys.executable).with_name("otel-replay"))
FIRST, SECOND, NIGHT = "r_phoenix_first", "r_phoenix_second", "r_phoenix_night"
NIGHT_PROJECT = "night shift"
DEAD = "http://127.0.0.1:9"
"""Where the replayed agent is sent: nothing listens there, and nothing has to."""
ADMIN_SECRET = "admin-secret-for-the-tests-0123456789"


@dataclass(frozen=True)
class Guarded:
    """A Phoenix with authentication on, and a system API key for it."""

    phoenix: Phoenix
    key: str

    @property
    def secret(self) -> str:
        """The part of the key that must never be written anywhere: the JWT's signature."""
        return self.key.rpartition(".")[2]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guarded]:
    settings = {
        "PHOENIX_ENABLE_AUTH": "true",
        "PHOENIX_SECRET": "jwt-signing-secret-for-the-tests-0123456789",
        "PHOENIX_ADMIN_SECRET": ADMIN_SECRET,
    }
    with serve(tmp_path_factory.mktemp("phoenix"), **settings) as server:
        yield Guarded(server, system_api_key(server))


def system_api_key(phoenix: Phoenix) -> str:
    request = urllib.request.Request(
        f"{phoenix.url}/v1/system/api_keys",
        data=json.dumps({"data": {"name": "otel-replay tests"}}).encode(),
        headers={"Authorization": f"Bearer {ADMIN_SECRET}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        key: str = json.load(answer)["data"]["key"]
    return key


@pytest.fixture(scope="module")
def phoenix(guarded: Guarded) -> Phoenix:
    return guarded.phoenix


@pytest.fixture(autouse=True)
def api_key(guarded: Guarded, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test reads Phoenix as its users would: with the key in ``PHOENIX_API_KEY``."""
    monkeypatch.setenv("PHOENIX_API_KEY", guarded.key)


@pytest.fixture(scope="module")
def recordings(guarded: Guarded) -> dict[str, Recording]:
    """Three runs of the example agent: two in the default project, one in the project "night
    shift" whose streamed answers (about 5 KiB each) are over OTEL_REPLAY_INLINE_LIMIT."""
    night = {
        "OTEL_REPLAY_INLINE_LIMIT": "4096",
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={NIGHT_PROJECT}",
    }
    with StandIn() as standin:
        return {
            run_id: record(guarded.phoenix, standin, run_id, extra, key=guarded.key)
            for run_id, extra in [(FIRST, {}), (SECOND, {}), (NIGHT, night)]
        }


def _assert_secret_kept(guarded: Guarded, texts: Iterable[str], directory: Path) -> None:
    """The key is in none of ``texts`` and no file under ``directory``."""
    assert guarded.secret not in "".join(texts)
    for path in directory.rglob("*"):
        if path.is_file():
            assert guarded.secret.encode() not in path.read_bytes(), path


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
    guarded: Guarded, phoenix: Phoenix, recordings: dict[str, Recording], tmp_path: Path
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
    _assert_secret_kept(guarded, [done.stdout, done.stderr], tmp_path)


def test_import_show_diff_and_export(
    guarded: Guarded,
    phoenix: Phoenix,
    recordings: dict[str, Recording],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
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
    run = load_run(str(tmp_path / "bundle"))
    assert run.run_id == FIRST
    # The key is in no message, log, stored run or bundle.
    outputs = [r.output for r in (done, shown, diffed, exported)]
    _assert_secret_kept(guarded, [*outputs, caplog.text, str(run)], tmp_path)


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


def test_without_the_key_or_with_another_it_is_one_line(
    guarded: Guarded,
    phoenix: Phoenix,
    recordings: dict[str, Recording],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ref = phoenix.ref
    store = str(tmp_path / "s")
    monkeypatch.delenv("PHOENIX_API_KEY")
    line = assert_bad_input(run_cli("import", ref, "--store", store))
    assert line == (
        f"Error: {ref}/default: the server asks for an API key: set PHOENIX_API_KEY (HTTP 401)"
    )
    wrong = "px-wrong-key-5309-" + guarded.key[-8:]
    monkeypatch.setenv("PHOENIX_API_KEY", wrong)
    line = assert_bad_input(run_cli("import", f"{ref}#{FIRST}", "--store", store))
    assert line == (
        f"Error: {ref}/default: the server refused the API key in PHOENIX_API_KEY (HTTP 401)"
    )
    # A key a header cannot carry is refused before any request, without being quoted.
    asked = len(phoenix.requests())
    monkeypatch.setenv("PHOENIX_API_KEY", "px-line-one\r\nX-Injected: px-line-two")
    with pytest.raises(SourceError) as caught:
        load_run(ref)
    assert str(caught.value) == (
        f"{ref}/default: PHOENIX_API_KEY holds characters an HTTP header cannot carry "
        "(spaces, line breaks, non-ASCII)"
    )
    assert len(phoenix.requests()) == asked
