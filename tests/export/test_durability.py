"""A True from ``TracerProvider.force_flush()`` means the steps are on disk."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from otel_replay.store import Store
from tests.export._support import INSTRUMENT, ROOT, subprocess_env

SCRIPT = str(Path(__file__).with_name("_flush_kill_script.py"))
COUNT = 2000


def test_provider_force_flush_then_sigkill_keeps_every_step(tmp_path: Path) -> None:
    store_path = tmp_path / "store"
    proc = subprocess.run(
        [str(INSTRUMENT), sys.executable, SCRIPT, str(COUNT)],
        cwd=ROOT,
        check=False,
        env=subprocess_env(store_path, OTEL_REPLAY_RUN_ID="r_flush_kill"),
        capture_output=True,
        text=True,
        timeout=120,
    )
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
