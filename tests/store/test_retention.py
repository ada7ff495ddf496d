"""Retention and gc: expired runs go, pinned and recent ones stay, nothing referenced is lost."""

from __future__ import annotations

import os
import time
from pathlib import Path

from otel_replay.step import RunEnd
from otel_replay.store import Retention, Store
from otel_replay.store._gc import GRACE_S
from tests.store._data import chat_bodies, make_step

DAY = 86_400.0


def _record(store: Store, run_id: str, *, error: bool = False, turns: int = 3) -> None:
    now = time.time_ns()
    for index, (request, response) in enumerate(chat_bodies(turns, seed=len(run_id))):
        failed = "E" if error and index == turns - 1 else None
        store.put([make_step(run_id, index, request, response, error_type=failed, start_ns=now)])
        store.flush()
    if error:  # the application failed with its last step
        store.end_run(RunEnd(run_id, now, "E"))


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_expired_runs_go_by_status_and_pins_keep_runs(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with Store.open(root) as store:
        for run_id in ("ok-old", "ok-pinned", "err-old"):
            _record(store, run_id, error=run_id.startswith("err"))
        store.pin("ok-pinned")
    with Store.open(root) as store:
        end = store.run("ok-old").end_ns / 1e9
        assert store.gc(now=end + 6 * DAY).runs_removed == ()
        report = store.gc(now=end + 8 * DAY)
        assert report.runs_removed == ("ok-old",)
        # Its record goes; its objects share a pack that is mostly alive: kept until it is not.
        assert report.bytes_freed > 0 and report.files_removed == 1
        assert {r.run_id for r in store.runs()} == {"ok-pinned", "err-old"}
        assert store.gc(now=end + 29 * DAY).runs_removed == ()
        report = store.gc(now=end + 31 * DAY)
        assert report.runs_removed == ("err-old",)
        assert report.blobs_removed > 0 and report.compacted == 1  # two thirds dead: repacked
        assert [r.run_id for r in store.runs()] == ["ok-pinned"]
        assert len(list(root.rglob("*.rec"))) == 1 and store.verify() == []
        assert store.request_body("ok-pinned", 2) == chat_bodies(3, len("ok-pinned"))[2][0]


def test_dry_run_changes_nothing_and_reports_the_same(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with Store.open(root) as store:
        _record(store, "a")
        _record(store, "b")
    before = {p: (root / p).read_bytes() for p in _files(root)}
    with Store.open(root) as store:
        later = time.time() + 8 * DAY
        planned = store.gc(now=later, dry_run=True)
        assert planned.dry_run and set(planned.runs_removed) == {"a", "b"}
        assert {p: (root / p).read_bytes() for p in _files(root) if "index" not in p} == {
            p: data for p, data in before.items() if "index" not in p
        }
        assert len(store.runs()) == 2
        done = store.gc(now=later)
        assert (done.runs_removed, done.blobs_removed, done.bytes_freed) == (
            planned.runs_removed,
            planned.blobs_removed,
            planned.bytes_freed,
        )
        assert store.runs() == [] and not list(root.rglob("*.pack"))


def test_policy_comes_from_the_settings(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OTEL_REPLAY_RETAIN_OK_DAYS", "0.5")
    monkeypatch.setenv("OTEL_REPLAY_RETAIN_ERROR_DAYS", "2")
    assert Retention.from_env() == Retention(ok_days=0.5, error_days=2.0)
    with Store.open(tmp_path / "s") as store:
        _record(store, "short")
    with Store.open(tmp_path / "s") as store:
        end = store.run("short").end_ns / 1e9
        assert store.gc(now=end + DAY).runs_removed == ("short",)


def test_unreferenced_leftovers_go_once_settled(tmp_path: Path) -> None:
    """A killed writer's uncommitted pack and its temporary file; small packs merged."""
    root = tmp_path / "s"
    with Store.open(root) as store:
        _record(store, "kept")
    with Store.open(root) as store:
        _record(store, "kept-too", turns=2)
        store._closed = True  # leave like a killed process: no close-time merging
        store._index.close()
    with Store.open(tmp_path / "other") as other:
        _record(other, "never-committed", turns=1)
    (written,) = (tmp_path / "other" / "objects").rglob("*.pack")
    orphan = root / written.relative_to(tmp_path / "other")
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(written.read_bytes())  # published, never committed, never referenced
    temp = orphan.parent / ".tmp-123-abcd"
    temp.write_bytes(b"partial")
    old = time.time() - GRACE_S - 10
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (old, old))
    with Store.open(root) as store:
        assert {p.kind for p in store.verify()} >= {"unindexed", "temp"}
        planned = store.gc(now=time.time(), dry_run=True)
        report = store.gc(now=time.time())
        assert report.runs_removed == () and report.compacted >= 1
        # The killed writer's two record files of its run become one, counted apart from the
        # packs, as the dry run foretold (which leaves out the pack the index does not know
        # yet: it reads, and so writes, no index).
        assert report.records_merged == planned.records_merged == 1
        assert planned.compacted == report.compacted - 1
        assert not orphan.exists() and not temp.exists()
        assert [p for p in store.verify() if p.damage] == []
        assert store.run("kept").step_count == 3 and store.run("kept-too").step_count == 2
        assert len(list(root.rglob("*.pack"))) == 1


def test_young_leftovers_are_left_for_their_writer(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with Store.open(root) as store:
        _record(store, "r")
    orphan = root / "objects" / "01" / f"01{'0' * 62}.pack"
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"x")
    with Store.open(root) as store:
        assert store.gc().files_removed == 0
    assert orphan.exists()


def test_gc_progress_is_reported(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    with Store.open(tmp_path / "s") as store:
        _record(store, "a")
        _record(store, "b")
        store.gc(
            now=time.time() + 40 * DAY, progress=lambda done, total: calls.append((done, total))
        )
    assert calls[-1] == (3, 3)
