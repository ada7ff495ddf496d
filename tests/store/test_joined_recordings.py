"""Several open stores writing one recording: a process and the worker processes it started
record one run, each into files of its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from otel_replay.step import RunEnd
from otel_replay.store import Store, new_recording_id
from tests.store._data import chat_bodies, make_step


def _write(store: Store, run_id: str, indices: range, pairs: list[tuple[bytes, bytes]]) -> None:
    for index in indices:
        store.put([make_step(run_id, index, *pairs[index])])
        store.flush()


def test_stores_joining_a_recording_write_one_run(tmp_path: Path) -> None:
    pairs = chat_bodies(9, seed=3)
    recording = new_recording_id()
    parent = Store.open(tmp_path / "s", recording=recording)
    _write(parent, "agent", range(0, 3), pairs)
    # Two workers, interleaved with the parent and each other, and one with a run of its own.
    workers = [
        Store.open(tmp_path / "s", recording=recording, inherited_runs=["agent"]) for _ in range(2)
    ]
    _write(workers[0], "agent", range(3, 5), pairs)
    _write(workers[1], "agent", range(5, 7), pairs)
    _write(workers[1], "its-own", range(0, 1), pairs)
    _write(parent, "agent", range(7, 9), pairs)
    for worker in workers:
        worker.close()
    with Store.open(tmp_path / "s", create=False) as reader:
        # A worker's close ends the run it began, never the one it inherited.
        assert reader.run("agent").status == "incomplete"
        assert reader.run("its-own").status == "ok"
    parent.end_run(RunEnd("agent", 1_700_000_100 * 10**9))
    parent.close()

    def check(store: Store) -> None:
        assert {r.run_id: r.step_count for r in store.runs()} == {"agent": 9, "its-own": 1}
        assert store.run("agent").status == "ok"
        steps = store.steps("agent")
        assert [step.index for step in steps] == list(range(9))
        assert [store.request_body(step) for step in steps] == [p[0] for p in pairs]
        assert [p for p in store.verify() if p.damage] == []

    with Store.open(tmp_path / "s", create=False) as store:
        assert store.run("agent").recording == 1  # one recording, not agent@2
        check(store)
        store.compact()  # each writer's files merged: still one run
        check(store)
    with Store.rebuild(tmp_path / "s") as store:  # the records alone say it
        check(store)


def test_each_writer_has_files_of_its_own(tmp_path: Path) -> None:
    pairs = chat_bodies(2, seed=5)
    recording = new_recording_id()
    with Store.open(tmp_path / "s", recording=recording) as first:
        assert first.recording == recording
        _write(first, "agent", range(0, 1), pairs)
    with Store.open(tmp_path / "s", recording=recording) as second:
        _write(second, "agent", range(1, 2), pairs)
    files = sorted(p.name for p in (tmp_path / "s" / "runs").rglob("*.rec"))
    assert len(files) == 2 and len({name.split("-")[0] for name in files}) == 2
    assert not any(name.startswith(recording) for name in files)


def test_a_store_opened_without_a_recording_begins_its_own(tmp_path: Path) -> None:
    pairs = chat_bodies(2, seed=7)
    with Store.open(tmp_path / "s") as first:
        _write(first, "agent", range(0, 1), pairs)
    with Store.open(tmp_path / "s") as second:
        _write(second, "agent", range(0, 1), pairs)
        assert second.recording != first.recording
    with Store.open(tmp_path / "s", create=False) as store:
        assert sorted(r.run_id for r in store.runs()) == ["agent", "agent@2"]


@pytest.mark.parametrize("recording", ["", "r1", "0123456789ABCDEF", "../../etc/passwd"])
def test_a_recording_id_that_is_not_one_is_refused(tmp_path: Path, recording: str) -> None:
    with pytest.raises(ValueError, match="not a recording id"):
        Store.open(tmp_path / "s", recording=recording)
    assert not (tmp_path / "s").exists() or not os.listdir(tmp_path / "s" / "runs")
