"""Several processes recording into one store at once; readers beside a writer thread."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from otel_replay.store import Store
from tests.store._data import chat_bodies, make_step
from tests.store._writer import bodies, spawn


@pytest.mark.subprocess
def test_processes_recording_at_once(tmp_path: Path) -> None:
    store_path = tmp_path / "s"
    Store.open(store_path).close()  # created once; the writers race on everything else
    runs = {"run-1": 25, "run-2": 25, "run-3": 25}
    procs = [spawn(store_path, run_id, steps) for run_id, steps in runs.items()]
    procs.append(spawn(store_path, "run-1", 25))  # a second writer of the same run id
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert out.endswith("closed\n")
    with Store.open(store_path) as store:
        # Writers storing the same bodies at the same instant may each write a pack of them;
        # the index locates one, and the copy is a leftover notice until gc removes it.
        assert {p.kind for p in store.verify()} <= {"leftover"}
        store.gc()
        assert store.verify() == []
        # The second recording of run-1 is a run of its own: nothing is merged.
        assert {r.run_id: r.step_count for r in store.runs()} == {**runs, "run-1@2": 25}
        for name, steps in {**runs, "run-1@2": 25}.items():
            expected = bodies(name.split("@")[0], steps)
            for step in store.steps(name):
                assert store.request_body(step) == expected[step.index][0]
                assert store.response_body(step) == expected[step.index][1]
            assert len(store.spans(name)) == steps
        # Both recordings of run-1 share every body: each is stored once.
        assert store.run("run-1@2").recorded_id == "run-1"


def test_readers_beside_a_writer_thread(tmp_path: Path) -> None:
    pairs = chat_bodies(40, seed=9)
    errors: list[BaseException] = []
    done = threading.Event()
    with Store.open(tmp_path / "s") as store:

        def write() -> None:
            try:
                for index, (request, response) in enumerate(pairs):
                    store.put([make_step("live", index, request, response)])
                    store.flush()
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
            finally:
                done.set()

        def read() -> None:
            try:
                while not done.is_set():
                    for run in store.runs():
                        for step in store.steps(run.run_id):
                            assert store.request_body(step) == pairs[step.index][0]
                    time.sleep(0.005)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [
            threading.Thread(target=write),
            *(threading.Thread(target=read) for _ in range(2)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        assert store.run("live").step_count == 40


def test_threads_writing_into_one_store_and_into_two(tmp_path: Path) -> None:
    """Threads share one open store (one recording) or each open their own (two recordings of
    one id become two runs); every step comes back from the thread that wrote it."""
    root = tmp_path / "s"
    shared = Store.open(root)
    errors: list[BaseException] = []

    def record(store: Store, run_id: str, seed: int) -> None:
        try:
            for index, (request, response) in enumerate(chat_bodies(15, seed)):
                store.put([make_step(run_id, index, request, response)])
                store.flush()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    own = [Store.open(root) for _ in range(2)]
    jobs = [(shared, f"t-{n}", n) for n in range(4)]
    jobs += [(store, "twice", 10 + n) for n, store in enumerate(own)]
    threads = [threading.Thread(target=record, args=job) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for store in (shared, *own):
        store.close()
    assert errors == []
    with Store.open(root) as store:
        runs = {r.run_id: r for r in store.runs()}
        assert sorted(runs) == ["t-0", "t-1", "t-2", "t-3", "twice", "twice@2"]
        for n in range(4):
            assert [store.request_body(s) for s in store.steps(f"t-{n}")] == [
                q for q, _ in chat_bodies(15, n)
            ]
        seeds = {store.request_body("twice", 0), store.request_body("twice@2", 0)}
        assert seeds == {chat_bodies(1, 10)[0][0], chat_bodies(1, 11)[0][0]}
        for name in ("twice", "twice@2"):
            seed = 10 if store.request_body(name, 0) == chat_bodies(1, 10)[0][0] else 11
            assert [store.response_body(s) for s in store.steps(name)] == [
                r for _, r in chat_bodies(15, seed)
            ]
        assert all(run.status == "ok" for run in runs.values())
        assert store.verify() == []
