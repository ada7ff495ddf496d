"""A relative ``OTEL_REPLAY_STORE`` means the directory the recorded process started in, even
when the application changes its directory later (an agent working in a checkout or a
temporary directory), under the real ``opentelemetry-instrument``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from examples.standin import StandIn
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, subprocess_env

pytestmark = pytest.mark.subprocess

SCRIPT = str(Path(__file__).with_name("_chdir_agent.py"))


@pytest.mark.parametrize(("when", "steps"), [("first", 1), ("after-a-write", 2)])
def test_a_process_that_changes_directory_records_where_it_started(
    standin: StandIn, tmp_path: Path, when: str, steps: int
) -> None:
    # The store used to be opened at its first write, relative to the directory of the
    # moment: a move before it put the whole recording in the work directory (none where
    # the user looks); a move after it made every later write fail, and those steps were lost.
    workdir = tmp_path / "work"
    workdir.mkdir()
    done = subprocess.run(
        [str(INSTRUMENT), sys.executable, SCRIPT, standin.tools_url, str(workdir), when],
        cwd=tmp_path,
        env=subprocess_env(Path("recordings"), OTEL_REPLAY_RUN_ID="r_chdir"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "otel-replay" not in done.stderr  # nothing failed, nothing was given up
    assert list(workdir.iterdir()) == []
    with Store.open(tmp_path / "recordings", create=False) as store:
        assert store.run("r_chdir").status == "ok"
        stored = store.steps("r_chdir")
        assert [s.index for s in stored] == list(range(steps))
        assert all(s.complete and s.status_code == 200 for s in stored)
        assert [p for p in store.verify() if p.damage] == []
