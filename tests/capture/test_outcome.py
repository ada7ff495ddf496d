"""A run's status is the application's outcome: a program that recovered from a failed step is
``ok`` (its failed steps counted apart), one that died of an uncaught exception or exited with
a failing status is ``error``. Each program runs for real under ``opentelemetry-instrument``
with the ``replay`` exporter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from otel_replay.runs._process_trace import exit_failure
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, subprocess_env

PROGRAM = """
import sys
import otel_replay

def offline():
    raise ConnectionError("price list unreachable")

otel_replay.now()
try:
    otel_replay.side_effect("fetch_prices", offline)  # a step fails; the program goes on
except ConnectionError:
    pass
otel_replay.uuid4()
ENDING
"""

ENDINGS = {
    "recovered": ("print('done')", 0, None),
    "exit status": ("sys.exit(3)", 3, "exit status 3"),
    "exit message": ("sys.exit('no orders to process')", 1, "exit status 1"),
    "uncaught": ("raise ValueError('bad order')", 1, "ValueError"),
    "exit zero": ("sys.exit(0)", 0, None),
}


@pytest.mark.subprocess
@pytest.mark.parametrize("ending", list(ENDINGS))
def test_the_process_run_ends_with_the_programs_outcome(tmp_path: Path, ending: str) -> None:
    code, status, error_type = ENDINGS[ending]
    script = tmp_path / "agent.py"
    script.write_text(PROGRAM.replace("ENDING", code))
    store = tmp_path / "store"
    done = subprocess.run(
        [str(INSTRUMENT), sys.executable, str(script)],
        env=subprocess_env(store, OTEL_REPLAY_RUN_ID="r_outcome"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == status, done.stderr
    with Store.open(store, create=False) as opened:
        (run,) = opened.runs()
    assert run.step_count == 3 and run.error_steps == 1
    assert run.error_type == error_type
    assert run.status == ("ok" if error_type is None else "error")


def test_what_sys_exit_says_of_a_run() -> None:
    assert exit_failure(None) is None and exit_failure(0) is None
    assert exit_failure(2) == "exit status 2"
    assert exit_failure("message") == "exit status 1"
