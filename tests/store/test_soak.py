"""A soak: one process records two hundred model calls through the real openai SDK against
the stand-in, under ``opentelemetry-instrument`` and the ``replay`` exporter; then the store
verifies clean and reads back whole, before and after gc. (``bench/store_soak.py`` runs the
20,000-call version and prints the shutdown's time.)"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from examples.standin import StandIn
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, ROOT, subprocess_env

pytestmark = pytest.mark.subprocess

AGENT = str(Path(__file__).with_name("_soak_agent.py"))
CLI = str(Path(sys.executable).with_name("otel-replay"))
CALLS, TURNS = 200, 20


def _verify(store: Path) -> None:
    done = subprocess.run(
        [CLI, "verify", "--store", str(store)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"is intact: {CALLS // TURNS} runs, {CALLS} steps" in done.stdout
    assert "damaged" not in done.stdout and "notice" not in done.stdout, done.stdout


def test_a_soak_verifies_clean_and_reads_back_whole(standin: StandIn, tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = subprocess.run(
        [str(INSTRUMENT), sys.executable, AGENT, standin.openai_base_url, str(CALLS)],
        cwd=ROOT,
        env=subprocess_env(store),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("shutdown "), done.stdout
    sent = Counter(r.body for r in standin.received if r.path == "/v1/chat/completions")
    assert sum(sent.values()) == CALLS
    _verify(store)
    with Store.open(store, create=False) as opened:
        runs = opened.runs()
        assert [r.step_count for r in runs] == [TURNS] * (CALLS // TURNS)
        assert all(r.status == "ok" for r in runs)
        stored = Counter(
            opened.request_body(step) for run in runs for step in opened.steps(run.run_id)
        )
        assert stored == sent
        assert all(
            opened.response_body(step).startswith(b"{")
            for run in runs
            for step in opened.steps(run.run_id)
        )
        opened.gc()
    _verify(store)
