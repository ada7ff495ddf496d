"""A replay made by ``otel-replay replay`` is a run of its own, in mode ``replay``, that names
the run it replays: on every span, in the store's run facts, in ``runs``, ``show`` and
``--json``; and ``latest`` still means the latest recording.

The support agent is recorded under ``opentelemetry-instrument`` against the stand-in (the real
openai SDK), the stand-in is stopped, and the real CLI replays it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from otel_replay.store import Store
from tests.replay.test_replay_cli import AGENT, CLI, agent_store, replay

pytestmark = pytest.mark.subprocess

__all__ = ["agent_store"]  # the recording, shared as a fixture

AgentStore = tuple[Path, str, str]


def _cli(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``otel-replay ARGS --store STORE``, piped: tables one row per line."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(
        [str(CLI), *args, "--store", str(store)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_replay_is_a_run_naming_its_parent_everywhere(
    agent_store: AgentStore, tmp_path: Path
) -> None:
    template, run, _ = agent_store
    store = tmp_path / "store"
    subprocess.run(["cp", "-r", str(template), str(store)], check=True)
    done = replay(store, run, sys.executable, str(AGENT), flags=["--json"])
    assert done.returncode == 0, done.stderr
    new_id = json.loads(done.stdout)["replay_run_id"]

    # Its spans and its facts in the store.
    with Store.open(store, create=False) as opened:
        info = opened.run(new_id)
        spans = opened.spans(new_id)
        recording = opened.run(run)
    assert (info.mode, info.parent_run_id) == ("replay", run)
    assert (recording.mode, recording.parent_run_id) == ("record", None)
    assert info.step_count == 9 and spans
    assert {s["attributes"].get("replay.parent.run.id") for s in spans} == {run}
    assert {s["attributes"].get("replay.mode") for s in spans} == {"replay"}

    # runs: the table, --json and --mode.
    table = _cli(store, "runs").stdout
    (row,) = [line for line in table.splitlines() if line.startswith(new_id)]
    assert f"   replay of {run}   " in row
    listed = {r["run_id"]: r for r in json.loads(_cli(store, "runs", "--json").stdout)}
    assert (listed[new_id]["mode"], listed[new_id]["parent_run_id"]) == ("replay", run)
    assert (listed[run]["mode"], listed[run]["parent_run_id"]) == ("record", None)
    replays = json.loads(_cli(store, "runs", "--mode", "replay", "--json").stdout)
    assert [r["run_id"] for r in replays] == [new_id]
    recordings = json.loads(_cli(store, "runs", "--mode", "record", "--json").stdout)
    assert [r["run_id"] for r in recordings] == [run]

    # show: the header and --json.
    header = _cli(store, "show", new_id).stdout.splitlines()[0]
    assert header.startswith(f"run {new_id}  ok  replay of {run}  ")
    shown = json.loads(_cli(store, "show", new_id, "--json").stdout)["run"]
    assert (shown["mode"], shown["parent_run_id"]) == ("replay", run)

    # latest is the recording, not the newer replay: for show, and for replay itself.
    assert json.loads(_cli(store, "show", "latest", "--json").stdout)["run"]["run_id"] == run
    again = replay(store, "latest", sys.executable, str(AGENT), flags=["--json"])
    assert again.returncode == 0, again.stderr
    document = json.loads(again.stdout)
    assert document["run"] == run
    with Store.open(store, create=False) as opened:
        assert opened.run(document["replay_run_id"]).parent_run_id == run
