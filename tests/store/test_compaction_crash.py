"""Compaction killed (SIGKILL) at any point: ``verify`` finds no damage, every run reads back
whole, and the next gc removes what was left over.

The compactions: the merge a closing store does (the replay exporter's shutdown), ``compact``
and ``gc``. Each is first run to the end to count its writes (files published or deleted,
index transactions), then once killed right before each of them (``tests/store/_compactor``):
every state a killed compaction can leave on disk.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from otel_replay.store import Store
from otel_replay.store._gc import GRACE_S
from tests.store._compactor import RUNS, STEPS
from tests.store._data import span
from tests.store._writer import ROOT, bodies

pytestmark = pytest.mark.subprocess

KEPT = [run_id for run_id in RUNS if run_id != "expired"]
SHM = Path("/dev/shm")


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A directory in memory when there is one: a kill needs no fsync to be real, and a few
    hundred compactions with fsyncs would take minutes."""
    if not SHM.is_dir():
        yield tmp_path
        return
    where = Path(tempfile.mkdtemp(dir=SHM, prefix="otel-replay-test-"))
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


class Compactor:
    """The ``tests.store._compactor`` process: one command at a time."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.store._compactor"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def __call__(self, what: str, store: Path, kill_at: int) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{what} {store} {kill_at}\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


def _assert_whole(store: Store, run_id: str) -> None:
    steps = store.steps(run_id)
    assert [s.index for s in steps] == list(range(STEPS)), run_id
    expected = bodies(run_id, STEPS)
    assert [store.request_body(s) for s in steps] == [q for q, _ in expected]
    assert [store.response_body(s) for s in steps] == [r for _, r in expected]
    assert store.spans(run_id) == [span(run_id, index) for index in range(STEPS)]
    assert store.run(run_id).status == "ok"


def _assert_sound(root: Path, what: str, kill_at: int) -> None:
    where = f"{what}, killed before write {kill_at}"
    with Store.open(root, create=False) as store:
        damage = [p.message for p in store.verify() if p.damage]
        assert damage == [], where
        for run_id in RUNS if what != "gc" else KEPT:
            _assert_whole(store, run_id)
        store.gc(now=time.time() + 2 * GRACE_S)
        assert store.verify() == [], f"{where}: the next gc leaves a tidy store"
        assert sorted(r.run_id for r in store.runs()) == sorted(KEPT), where
        for run_id in KEPT:
            _assert_whole(store, run_id)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
@pytest.mark.parametrize("what", ["close", "compact", "gc"])
def test_compaction_killed_before_any_write_leaves_a_sound_store(scratch: Path, what: str) -> None:
    compactor = Compactor()
    try:
        prepared = scratch / "prepared"
        if what != "close":
            assert compactor("record", prepared, 0) == "writes 0"
        full = scratch / "full"
        if prepared.exists():
            shutil.copytree(prepared, full)
        done = compactor(what, full, 0)
        assert done.startswith("writes "), done
        writes = int(done.split()[1])
        assert writes > 5
        _assert_sound(full, what, 0)
        for kill_at in range(1, writes + 1):
            root = scratch / f"killed-{kill_at}"
            if prepared.exists():
                shutil.copytree(prepared, root)
            assert compactor(what, root, kill_at) == "killed"
            _assert_sound(root, what, kill_at)
            shutil.rmtree(root)
    finally:
        compactor.close()
