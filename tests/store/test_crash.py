"""A recording process killed with SIGKILL at random points leaves a sound store."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from otel_replay.store import Store
from otel_replay.store._gc import GRACE_S
from tests.store._data import make_step
from tests.store._writer import bodies, spawn

STEPS = 400
ITERATIONS = 15


@pytest.mark.subprocess
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_at_random_points(tmp_path: Path) -> None:
    """A writer flushing after every step, killed (-9) at a random moment, fifteen times into
    one store: no damage, every step the index lists reads back byte-exact, every flushed
    step is there, and each killed run is incomplete."""
    store_path = tmp_path / "s"
    rng = random.Random(20261121)
    flushed: dict[str, set[int]] = {}
    counts: dict[str, int] = {}
    for iteration in range(ITERATIONS):
        run_id = f"killed-{iteration}"
        proc = spawn(store_path, run_id, STEPS)
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first == "flushed 0\n", proc.stderr.read() if proc.stderr else first
        time.sleep(rng.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL, "the writer finished before it was killed"
        # Read on through the reader readline() used: it may hold lines already
        # (communicate() would read the pipe beneath it and miss them).
        lines = [first, *proc.stdout.readlines()]
        proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()
        flushed[run_id] = {int(line.split()[1]) for line in lines if line.startswith("flushed ")}

        with Store.open(store_path) as store:
            problems = store.verify()
            assert [p for p in problems if p.damage] == []
            cut = {p.run_id for p in problems if p.kind == "incomplete"}
            assert cut == set(flushed), "every killed run is listed incomplete"
            assert {r.run_id: r.status for r in store.runs()} == dict.fromkeys(
                flushed, "incomplete"
            )
            stored = {step.index: step for step in store.steps(run_id)}
            expected = bodies(run_id, max(stored) + 1)
            assert flushed[run_id] <= set(stored), f"{run_id}: flushed steps are missing"
            # a flush can complete before its line is printed: at most one step more
            assert sorted(stored) == list(range(len(stored)))
            assert len(flushed[run_id]) <= len(stored) <= len(flushed[run_id]) + 1
            counts[run_id] = len(stored)
            for index, step in stored.items():
                assert store.read_step(step) == make_step(
                    run_id, index, *expected[index], start_ns=step.start_ns - index * 10**9
                )
    # Killed fifteen times, the store is one gc away from tidy; a step whose files were
    # published but not yet indexed when its writer died is read from them now.
    with Store.open(store_path) as store:
        store.gc(now=time.time() + 2 * GRACE_S)
        assert [p for p in store.verify() if p.damage] == []
        for run_id, indexes in flushed.items():
            stored = store.steps(run_id)
            assert counts[run_id] <= len(stored) <= len(indexes) + 1
            expected = bodies(run_id, len(stored))
            assert [store.request_body(s) for s in stored] == [q for q, _ in expected]
            assert [store.response_body(s) for s in stored] == [r for _, r in expected]


def _flushed_eight_times(root: Path, run_id: str) -> tuple[Store, list[tuple[bytes, bytes]]]:
    """A store at ``root`` that recorded 8 steps of ``run_id``, one a flush (not closed)."""
    pairs = bodies(run_id, 8)
    store = Store.open(root)
    for index, (request, response) in enumerate(pairs):
        store.put([make_step(run_id, index, request, response, start_ns=time.time_ns())])
        store.flush()
    return store, pairs


def test_a_merge_cut_short_leaves_a_valid_store(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "s"
    store, pairs = _flushed_eight_times(root, "cut")
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


def test_a_close_with_no_time_left_leaves_the_merging_to_gc(tmp_path: Path) -> None:
    """``close(timeout=0)`` (a shutdown whose time is up) begins no merge: the flushes' packs
    and record files stay as written, the store is intact, and gc merges them later."""
    root = tmp_path / "s"
    store, pairs = _flushed_eight_times(root, "late")
    store.close(timeout=0)
    assert len(list(root.rglob("*.pack"))) == 8
    assert len(list(root.rglob("*.rec"))) == 9  # one a flush, and the run's end
    with Store.open(root) as reopened:
        assert reopened.verify() == []
        reopened.gc(now=time.time() + 2 * GRACE_S)
        assert len(list(root.rglob("*.pack"))) == 1
        assert len(list(root.rglob("*.rec"))) == 1
        assert [reopened.request_body(s) for s in reopened.steps("late")] == [q for q, _ in pairs]
        assert reopened.verify() == []
