"""Replay mismatch and a run with no commit, through the real programs: the example support
agent recorded under ``opentelemetry-instrument`` from a directory outside any git checkout
(so its run names no commit), then replayed by ``otel-replay replay`` with the stand-in
stopped: once with a changed system prompt (the replay diverges at its first step), once as a
fork whose change comes at step 2 (a fork differs from there on: that is its point)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from examples.standin import StandIn
from otel_replay.store import Store
from otel_replay.store._format import run_dir
from tests.cli._checks import run_cli
from tests.export._support import INSTRUMENT, ROOT, run_instrumented, subprocess_env
from tests.replay.test_replay_cli import replay

pytestmark = pytest.mark.subprocess

RUN = "r_20261121T070000_0a0b0c0d"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The store holding the recording, a replay that diverged and a fork; their ids."""
    root = tmp_path_factory.mktemp("triage-replays")
    store, outside = root / "store", root / "outside-any-checkout"
    outside.mkdir()
    agent = Path(shutil.copy(ROOT / "examples" / "support_agent.py", outside))
    with StandIn(event_delay=0.001) as standin:
        done = subprocess.run(
            [str(INSTRUMENT), sys.executable, str(agent)],
            env=subprocess_env(store, OTEL_REPLAY_RUN_ID=RUN, STANDIN_URL=standin.base_url),
            cwd=outside,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    prompt = {"SUPPORT_SYSTEM_PROMPT": "You are Ada. Answer in one word."}
    diverged = replay(store, RUN, sys.executable, str(agent), flags=["--json"], **prompt)
    assert diverged.returncode == 1, diverged.stderr
    (outside / "lost.json").write_text('{"error": {"status": 404, "message": "lost"}}')
    flags = ["--json", "--override", f"1=@{outside / 'lost.json'}"]
    forked = replay(store, RUN, sys.executable, str(agent), flags=flags)
    assert forked.returncode == 1, forked.stderr  # what the agent sends next differs
    return (
        store,
        json.loads(diverged.stdout)["replay_run_id"],
        json.loads(forked.stdout)["replay_run_id"],
    )


def test_a_replay_that_diverged_is_a_replay_mismatch_and_a_fork_past_its_change_is_not(
    replayed: tuple[Path, str, str],
) -> None:
    store, diverged, forked = replayed
    result = run_cli("triage", "--json", "--store", str(store))
    assert result.exit_code == 0, result.output
    runs = {run["run_id"]: run for run in json.loads(result.stdout)["runs"]}
    replay_run = runs[diverged]
    assert replay_run["mode"] == "replay"
    assert [(x["step"], x["category"], x["rule"]) for x in replay_run["steps"]] == [
        (0, "replay_mismatch", "diverged")
    ]
    # The label is on step 0: its reason does not name the step again ("step 0: step 0 …").
    assert replay_run["steps"][0]["reason"] == (
        f"openai.chat_completions differs from {RUN}: prompt hash, system instructions"
    )
    assert replay_run["label"]["reason"] == (
        f"step 0: openai.chat_completions differs from {RUN}: prompt hash, system instructions"
    )
    assert replay_run["label"]["severity"] == "error" and replay_run["failed"]
    fork = runs[forked]
    assert fork["mode"] == "fork" and (fork["label"], fork["steps"]) == (None, [])
    # The recording itself: nothing failed, but which code made it is unknown.
    recording = runs[RUN]
    assert recording["label"] is None
    assert [case["kind"] for case in recording["cold"]] == ["no_commit"]
    with Store.open(store, create=False) as opened:
        assert opened.run(RUN).commit is None
    listed = run_cli("runs", "--json", "--category", "replay_mismatch", "--store", str(store))
    assert [run["run_id"] for run in json.loads(listed.stdout)] == [diverged]


def test_a_damaged_recording_leaves_its_replays_triaged(
    replayed: tuple[Path, str, str], tmp_path: Path
) -> None:
    # Its replays read it as their parent: the parent's damage was reported as theirs ("run
    # RUN and 2 other runs could not be read"), and none of the three was triaged.
    store, diverged, forked = replayed
    copy = Path(shutil.copytree(store, tmp_path / "damaged"))
    for record in (copy / run_dir(RUN)).glob("*.rec"):
        record.write_bytes(record.read_bytes()[:100])
    result = run_cli("triage", "--json", "--store", str(copy))
    assert result.exit_code == 2, result.output
    runs = {run["run_id"]: run for run in json.loads(result.stdout)["runs"]}
    assert runs.keys() == {diverged, forked}
    assert runs[diverged]["mode"] == "replay" and runs[forked]["mode"] == "fork"
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"Error: run {RUN} could not be read, so not triaged (record file ")


_ORDER_AGENT = """
import os
import httpx
response = httpx.get(os.environ["STANDIN_URL"] + "/tools/orders/A-1234", timeout=5)
print(response.json()["status"])
"""


def test_a_fork_that_fails_on_the_fault_it_injected_is_no_environment_drift(
    tmp_path: Path,
) -> None:
    """``--inject 0=disconnect``, and the agent does not get over it: the run fails with
    ``httpx.RemoteProtocolError``, a network error by name, but the network never failed:
    the fork's fault did, and that is the experiment. The recording of the world really
    failing (the stand-in gone) is drift."""
    store, agent = tmp_path / "store", tmp_path / "order_agent.py"
    agent.write_text(_ORDER_AGENT)
    with StandIn(event_delay=0.001) as standin:
        done = run_instrumented(
            store, str(agent), OTEL_REPLAY_RUN_ID=RUN, STANDIN_URL=standin.base_url
        )
        assert done.returncode == 0, done.stderr
        gone = standin.base_url
    down = run_instrumented(store, str(agent), STANDIN_URL=gone)
    assert down.returncode == 1 and "ConnectError" in down.stderr, down.stderr
    forked = replay(
        store,
        RUN,
        sys.executable,
        str(agent),
        flags=["--json", "--inject", "0=disconnect"],
        STANDIN_URL=gone,
    )
    assert forked.returncode == 3, forked.stdout + forked.stderr  # identical; the agent failed
    fork = json.loads(forked.stdout)["replay_run_id"]

    result = run_cli("triage", "--json", "--store", str(store))
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    runs = {run["run_id"]: run for run in document["runs"]}
    assert runs[fork]["mode"] == "fork"
    assert (runs[fork]["status"], runs[fork]["error_type"]) == (
        "error",
        "httpx.RemoteProtocolError",
    )
    assert runs[fork]["label"] is None and runs[fork]["failed"]
    assert fork in document["uncategorised"]
    (world,) = [run for run_id, run in runs.items() if run_id not in (RUN, fork)]
    assert world["label"]["category"] == "environment_drift", world
