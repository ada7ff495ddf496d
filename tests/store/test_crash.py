"""A recording process killed with SIGKILL at random points leaves a sound store."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from otel_replay.store import Store
from tests.store._data import fixture
from tests.store._writer import bodies

ROOT = Path(__file__).resolve().parents[2]
STEPS = 400


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_at_random_points(tmp_path: Path) -> None:
    store_path = tmp_path / "s"
    rng = random.Random(20261121)
    flushed: dict[str, set[int]] = {}
    for iteration in range(8):
        run_id = f"killed-{iteration}"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.store._writer",
                str(store_path),
                run_id,
                str(STEPS),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first == "flushed 0\n", proc.stderr.read() if proc.stderr else first
        time.sleep(rng.uniform(0.0, 0.25))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL, "the writer finished before it was killed"
        lines = [first, *out.splitlines(keepends=True)]
        flushed[run_id] = {int(line.split()[1]) for line in lines if line.startswith("flushed ")}

        with Store.open(store_path) as store:
            problems = store.verify()
            assert [p for p in problems if p.damage] == []
            cut = {p.run_id for p in problems if p.kind == "incomplete"}
            assert cut == set(flushed), "every killed run is listed incomplete"
            for done_run, indexes in flushed.items():
                stored = {step.index: step for step in store.steps(done_run)}
                expected = bodies(done_run, max(stored) + 1)
                assert indexes <= set(stored), f"{done_run}: flushed steps are missing"
                # a flush can complete before its line is printed: at most one step more
                assert len(stored) <= max(indexes) + 2
                for index, step in stored.items():
                    assert step.complete
                    assert store.request_body(step) == expected[index][0]
                    assert store.response_body(step) == expected[index][1]


def test_a_merge_cut_short_leaves_a_valid_store(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "s"
    pairs = bodies("cut", 8)
    store = Store.open(root)
    for index, (request, response) in enumerate(pairs):
        store.put([fixture("cut", index, request, response, start_ns=time.time_ns())])
        store.flush()
    deleted: list[str] = []

    def delete_once(rel: str) -> None:
        if deleted:
            raise KeyboardInterrupt  # the process dies half-way through the deletions
        deleted.append(rel)
        (root / rel).unlink()

    monkeypatch.setattr(store._backend, "delete", delete_once)
    with pytest.raises(KeyboardInterrupt):
        store.close()
    monkeypatch.undo()
    assert len(list(root.rglob("*.pack"))) == 8  # 7 small packs left beside the merged one
    with Store.open(root) as reopened:
        assert [p for p in reopened.verify() if p.damage] == []
        assert [reopened.request_body(s) for s in reopened.steps("cut")] == [q for q, _ in pairs]
        old = time.time() - 7200
        for pack in root.rglob("*.pack"):
            os.utime(pack, (old, old))
        report = reopened.gc()
        assert report.runs_removed == ()
        assert len(list(root.rglob("*.pack"))) == 1
        assert [reopened.request_body(s) for s in reopened.steps("cut")] == [q for q, _ in pairs]
        assert [p for p in reopened.verify() if p.damage] == []
