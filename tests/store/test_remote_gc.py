"""gc beside writers on a store in S3 (a real moto server on loopback): the races it must not
lose to, each played out in the order that lost data before."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
import pytest

from otel_replay.store import Retention, Store
from otel_replay.store._lock import GcLease
from tests.store._data import chat_bodies, make_step
from tests.store._remote import Bucket, assert_holds_only, open_machine

OLD_NS = (int(time.time()) - 40 * 86_400) * 10**9
"""A run this old has expired under a retention of a day."""
HOUR = 3600.0


def _record_old(bucket: Bucket, machine: Path, sent: list[tuple[bytes, bytes]]) -> None:
    with open_machine(bucket, machine) as store:
        for index, (request, response) in enumerate(sent):
            store.put([make_step("old", index, request, response, start_ns=OLD_NS)])
        store.flush()


def _gc(bucket: Bucket, machine: Path, now: float) -> None:
    """A gc on ``machine``, whose clock reads ``now``."""
    with open_machine(bucket, machine) as store:
        store.retention = Retention(ok_days=1, error_days=1)
        report = store.gc(now=now)
        assert report.skipped is None, report.skipped


def _packs(bucket: Bucket) -> list[str]:
    url, options = bucket
    fs, root = fsspec.core.url_to_fs(url, **options)
    return [p for p in fs.find(f"{root}/objects") if p.endswith(".pack")]


def _before_first_put(
    store: Store, monkeypatch: pytest.MonkeyPatch, act: Callable[[], None]
) -> None:
    """Run ``act`` once, when ``store`` first uploads an object (a flush has decided what to
    reuse and is about to publish): what a slow upload lets happen meanwhile."""
    fs: Any = store._backend.fs  # type: ignore[attr-defined]
    put = fs.pipe_file
    fired = False

    def pipe_file(*args: Any, **kwargs: Any) -> Any:
        nonlocal fired
        if not fired:
            fired = True
            act()
        return put(*args, **kwargs)

    monkeypatch.setattr(fs, "pipe_file", pipe_file)


def test_a_flush_that_outlives_a_condemnation_is_written_again(
    s3_bucket: Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Machine B's flush decides to reuse the bodies of an expired run's pack. Before its
    upload is done, machine C's gc removes that run, condemns the pack, and (a grace period
    later, here none) deletes it. B's run must still be whole: the flush, having relied on
    a pack condemned meanwhile, stores those bodies again. (Before, the run's record named
    objects whose pack was gone.)"""
    monkeypatch.setenv("OTEL_REPLAY_GC_GRACE_S", "0")
    sent = chat_bodies(3, seed=5)
    _record_old(s3_bucket, tmp_path / "a", sent)
    writer = open_machine(s3_bucket, tmp_path / "b")
    (old_pack,) = _packs(s3_bucket)
    later = time.time() + 2 * HOUR  # C's clock runs ahead: only the server's counts now

    def gc_twice() -> None:
        _gc(s3_bucket, tmp_path / "c", later)
        _gc(s3_bucket, tmp_path / "c", later + 2 * HOUR)
        assert old_pack not in _packs(s3_bucket)  # condemned, then deleted

    for index, (request, response) in enumerate(sent):
        writer.put([make_step("new", index, request, response, start_ns=time.time_ns())])
    _before_first_put(writer, monkeypatch, gc_twice)
    writer.flush()
    writer.close()
    monkeypatch.undo()
    with open_machine(s3_bucket, tmp_path / "d") as store:
        assert_holds_only(store, "new", sent)


def test_gc_judges_ages_by_the_server_clock(s3_bucket: Bucket, tmp_path: Path) -> None:
    """Two machines run gc, their clocks two and four hours ahead of the server's. Neither
    may delete the pack of the run they expire: by the server's clock it is seconds old, and
    the grace period (an hour) has not passed. (Before, the first condemned it and the
    second deleted it at once.)"""
    sent = chat_bodies(2, seed=6)
    _record_old(s3_bucket, tmp_path / "a", sent)
    (old_pack,) = _packs(s3_bucket)
    _gc(s3_bucket, tmp_path / "c", time.time() + 2 * HOUR)
    _gc(s3_bucket, tmp_path / "d", time.time() + 4 * HOUR)
    assert _packs(s3_bucket) == [old_pack]
    with open_machine(s3_bucket, tmp_path / "e") as store:
        assert store.runs() == []
        assert [p for p in store.verify() if p.damage] == []


def test_a_second_gc_steps_back_while_one_is_at_work(s3_bucket: Bucket, tmp_path: Path) -> None:
    """While another machine's gc holds its lease, a gc changes nothing and says why; once
    the lease is given up, gc runs. (Before, two gcs at once each wrote the condemned list
    over the other's.)"""
    sent = chat_bodies(2, seed=7)
    _record_old(s3_bucket, tmp_path / "a", sent)
    with open_machine(s3_bucket, tmp_path / "b") as other:
        lease = GcLease(other._backend)  # type: ignore[attr-defined]
        lease.acquire()
    with open_machine(s3_bucket, tmp_path / "c") as store:
        store.retention = Retention(ok_days=1, error_days=1)
        report = store.gc()
        assert report.skipped is not None and "another gc is at work" in report.skipped
        assert lease.rel in report.skipped
        assert report.runs_removed == () and [r.run_id for r in store.runs()] == ["old"]
        lease.release()
        assert store.gc().runs_removed == ("old",)
        assert store.runs() == []
