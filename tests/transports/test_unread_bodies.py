"""A response the program never reads: an aiohttp agent backing off on 429 by its status
alone. The replay serves the recorded body all the same, and its own recording holds that body
(a socket feeds the body whether the program reads it or not), so ``otel-replay diff`` of the
recording against its identical replay finds nothing, as ``replay`` did."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from examples.standin import StandIn
from otel_replay.replay.sources import load_run
from tests.export._support import INSTRUMENT, ROOT, subprocess_env
from tests.replay.test_replay_cli import CLI, replay
from tests.transports.conftest import DEAD

pytestmark = pytest.mark.subprocess

AGENT = Path(__file__).with_name("_backoff_agent.py")


def test_a_429_never_read_replays_and_diffs_identical(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with StandIn(event_delay=0.001) as standin:
        recorded = subprocess.run(
            [str(INSTRUMENT), sys.executable, str(AGENT), standin.openai_base_url],
            env=subprocess_env(store, OTEL_REPLAY_RUN_ID="r_backoff"),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    answer = json.loads(recorded.stdout.strip().splitlines()[-1])
    assert answer["attempts"] == 3
    original = load_run("r_backoff", store=store)
    refused = [s.step for s in original.steps[:2]]
    assert [s.step.status_code for s in original.steps] == [429, 429, 200]
    assert all(s.response_body and s.error_type == "rate_limit_exceeded" for s in refused)

    done = replay(store, "r_backoff", sys.executable, str(AGENT), f"{DEAD}/v1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout.splitlines()[0]) == answer
    assert ": identical" in done.stdout
    found = re.search(r"recorded as run (r_\S+)", done.stdout)
    assert found is not None, done.stdout
    again = load_run(found.group(1), store=store)
    for old, new in zip(
        [s.step for s in original.steps], [s.step for s in again.steps], strict=True
    ):
        assert (new.status_code, new.error_type) == (old.status_code, old.error_type)
        assert (new.response_body, new.complete) == (old.response_body, old.complete)

    diff = subprocess.run(
        [str(CLI), "diff", "r_backoff", found.group(1), "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert diff.returncode == 0, diff.stdout + diff.stderr
    assert "identical: 3 steps" in diff.stdout
