"""A True from ``TracerProvider.force_flush()`` means the steps are on disk."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import otel_replay
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, ROOT, subprocess_env

pytestmark = pytest.mark.subprocess

SCRIPT = str(Path(__file__).with_name("_flush_kill_script.py"))
COUNT = 2000


def _flush_and_kill(store: Path, run_id: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The script, recorded into ``store`` as ``run_id``, flushed then killed."""
    return subprocess.run(
        [str(INSTRUMENT), sys.executable, SCRIPT, *args],
        cwd=ROOT,
        check=False,
        env=subprocess_env(store, OTEL_REPLAY_RUN_ID=run_id),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_provider_force_flush_then_sigkill_keeps_every_step(tmp_path: Path) -> None:
    store_path = tmp_path / "store"
    proc = _flush_and_kill(store_path, "r_flush_kill", str(COUNT))
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert proc.stdout.strip() == "flushed True", proc.stderr
    with Store.open(store_path, create=False) as store:
        run = store.run("r_flush_kill")
        steps = store.steps("r_flush_kill")
        assert [s.index for s in steps] == list(range(COUNT))
        assert run.status == "incomplete"  # killed: its recorder never closed it
        for step in (steps[0], steps[COUNT // 2], steps[-1]):
            assert b"A-" in store.response_body(step)
        assert [p for p in store.verify() if p.damage] == []


def test_values_and_tool_steps_survive_sigkill_after_a_flush_and_replay(tmp_path: Path) -> None:
    """Tool and value steps take the same road as HTTP ones: what the flush promised is kept,
    and a replay from the store serves back every value the killed process saw."""
    store_path = tmp_path / "store"
    proc = _flush_and_kill(store_path, "r_values_kill", "600", "values")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    seen, flushed = proc.stdout.splitlines()
    assert flushed == "flushed True", proc.stderr
    with Store.open(store_path, create=False) as store:
        steps = store.steps("r_values_kill")
        assert [s.index for s in steps] == list(range(600))
        assert [s.kind for s in steps[:3]] == ["tool", "value", "value"]
    with otel_replay.replaying("r_values_kill", store=str(store_path)) as result:
        again = [
            otel_replay.uuid4() if n % 3 == 1 else otel_replay.now() if n % 3 == 2 else None
            for n in range(600)
            if n % 3
        ]
    expected = [v for n, v in enumerate(seen.split(" ")) if n % 3]
    assert [str(v) if isinstance(v, uuid.UUID) else v.isoformat() for v in again] == expected
    assert [s.step.index for s in result.unused] == list(range(0, 600, 3))  # the tool calls
