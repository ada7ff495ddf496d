"""A store in S3 (a real moto server on loopback): packs in the bucket, the index cached."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import fsspec
import pytest

from otel_replay.errors import (
    CorruptBlobError,
    StoreError,
    StoreFormatError,
    StoreNotFoundError,
    StoreNotWritableError,
)
from otel_replay.store import ImportedFile, Retention, Store
from otel_replay.store._format import FORMAT_VERSION
from tests.store._data import chat_bodies, make_step, span
from tests.store._remote import Bucket, assert_holds_only, open_machine


def _record(
    store: Store, run_id: str, turns: int, start_ns: int | None = None
) -> list[tuple[bytes, bytes]]:
    pairs = chat_bodies(turns, seed=len(run_id))
    for index, (request, response) in enumerate(pairs):
        step = make_step(run_id, index, request, response, start_ns=start_ns or time.time_ns())
        store.put([step], [span(run_id, index, **{"gen_ai.request.model": "m1"})])
        store.flush()
    return pairs


def test_another_machine_rebuilds_everything_from_the_bucket(
    s3_bucket: Bucket, tmp_path: Path
) -> None:
    with open_machine(s3_bucket, tmp_path / "a") as store:
        pairs = _record(store, "remote-1", 6)
        store.pin("remote-1")
        spans = store.spans("remote-1")
    with open_machine(s3_bucket, tmp_path / "a") as store:
        runs = store.runs()
    assert runs[0].status == "ok"
    with open_machine(s3_bucket, tmp_path / "b") as other:
        assert other.runs() == runs and runs[0].pinned
        steps = other.steps("remote-1")
        assert [other.request_body(s) for s in steps] == [q for q, _ in pairs]
        assert [other.response_body(s) for s in steps] == [r for _, r in pairs]
        assert other.spans("remote-1") == spans
        assert other.verify() == []
    url, options = s3_bucket
    fs, root = fsspec.core.url_to_fs(url, **options)
    assert fs.find(f"{root}/objects") and not fs.exists(f"{root}/index.sqlite")


def test_the_files_one_machine_imported_are_known_to_another(
    s3_bucket: Bucket, tmp_path: Path
) -> None:
    """The import ledger lives in the bucket: another machine's import skips what this one
    read, and many imports (merged past a few ledger files) lose no entry."""
    files = [
        ImportedFile(f"/archive/traces-{n}.json", 100 + n, n, bytes([n]) * 32, bytes(32))
        for n in range(20)
    ]
    with open_machine(s3_bucket, tmp_path / "a") as store:
        for file in files:
            store.note_imported([file])
    with open_machine(s3_bucket, tmp_path / "b") as other:
        assert other.imported_files() == files
    url, options = s3_bucket
    fs, root = fsspec.core.url_to_fs(url, **options)
    assert 1 <= len(fs.ls(f"{root}/imports")) < len(files)


def test_two_machines_record_at_once_and_see_each_other(s3_bucket: Bucket, tmp_path: Path) -> None:
    first, second = open_machine(s3_bucket, tmp_path / "a"), open_machine(s3_bucket, tmp_path / "b")
    try:
        for index, ((q1, r1), (q2, r2)) in enumerate(
            zip(chat_bodies(4, seed=1), chat_bodies(4, seed=2), strict=True)
        ):
            first.put([make_step("from-a", index, q1, r1)])
            second.put([make_step("from-b", index, q2, r2)])
            first.flush()
            second.flush()
        assert {r.run_id for r in first.runs()} == {"from-a"}
        assert first.refresh() > 0 and second.refresh() > 0
        assert (
            {r.run_id for r in first.runs()}
            == {r.run_id for r in second.runs()}
            == {
                "from-a",
                "from-b",
            }
        )
        assert second.request_body("from-a", 3) == chat_bodies(4, seed=1)[3][0]
    finally:
        first.close()
        second.close()


def test_a_corrupt_object_in_the_bucket_is_named(s3_bucket: Bucket, tmp_path: Path) -> None:
    with open_machine(s3_bucket, tmp_path / "a") as store:
        _record(store, "remote-2", 3)
    url, options = s3_bucket
    fs, root = fsspec.core.url_to_fs(url, **options)
    (pack,) = [p for p in fs.find(f"{root}/objects") if p.endswith(".pack")]
    data = bytearray(fs.cat_file(pack))
    data[30] ^= 0xFF
    fs.pipe_file(pack, bytes(data))
    with open_machine(s3_bucket, tmp_path / "a") as store:
        problems = store.verify()
        assert any(
            p.kind == "pack" and p.path and p.path.endswith(pack.rsplit("/", 1)[1])
            for p in problems
        )
        body_problem = next(p for p in problems if p.kind == "body")
        step = store.step("remote-2", body_problem.step_index or 0)
        read = store.request_body if body_problem.blob == step.request_hash else store.response_body
        with pytest.raises(CorruptBlobError, match=url):
            read(step)


def test_gc_on_one_machine_is_seen_by_the_other(s3_bucket: Bucket, tmp_path: Path) -> None:
    old = (int(time.time()) - 40 * 86_400) * 10**9
    with open_machine(s3_bucket, tmp_path / "a") as store:
        _record(store, "old-run", 2, start_ns=old)
        _record(store, "new-run", 2)
    with open_machine(s3_bucket, tmp_path / "b") as other:
        assert {r.run_id for r in other.runs()} == {"old-run", "new-run"}
        report = other.gc()
        assert report.runs_removed == ("old-run",) and report.bytes_freed > 0
    with open_machine(s3_bucket, tmp_path / "a") as store:
        assert [r.run_id for r in store.runs()] == ["new-run"]
        assert store.verify() == []


def test_a_recording_gone_from_the_bucket_leaves_the_others_readable(
    s3_bucket: Bucket, tmp_path: Path
) -> None:
    """A run id recorded by two machines is two runs; when one's records disappear (another
    machine's gc), the cached index forgets that run and the other stays whole."""
    pairs = chat_bodies(4, seed=9)
    first, second = open_machine(s3_bucket, tmp_path / "a"), open_machine(s3_bucket, tmp_path / "b")
    try:
        for index, (request, response) in enumerate(pairs):
            writer = first if index < 2 else second
            writer.put([make_step("shared", index, request, response)])
            writer.flush()
        first.refresh()
        assert {r.run_id: r.step_count for r in first.runs()} == {"shared": 2, "shared@2": 2}
    finally:
        first.close()
        second.close()
    url, options = s3_bucket
    fs, root = fsspec.core.url_to_fs(url, **options)
    recording = first._session.recording
    for key in fs.find(f"{root}/runs"):
        if key.rsplit("/", 1)[1].startswith(recording):
            fs.rm(key)
    with open_machine(s3_bucket, tmp_path / "a") as store:
        assert [r.run_id for r in store.runs()] == ["shared@2"]
        kept = store.steps("shared@2")
        assert [store.request_body(s) for s in kept] == [q for q, _ in pairs[2:]]
        assert [p for p in store.verify() if p.damage] == []


def test_an_unknown_format_in_the_bucket_is_refused(s3_bucket: Bucket, tmp_path: Path) -> None:
    url, options = s3_bucket
    fs, root = fsspec.core.url_to_fs(url, **options)
    newer = FORMAT_VERSION + 1
    fs.pipe_file(
        f"{root}/FORMAT", json.dumps({"format": "otel-replay-store", "version": newer}).encode()
    )
    with pytest.raises(StoreFormatError, match=f"version {newer}"):
        open_machine(s3_bucket, tmp_path / "a")
    assert json.loads(fs.cat_file(f"{root}/FORMAT"))["version"] == newer


def test_a_bucket_that_does_not_exist_is_named(s3_bucket: Bucket, tmp_path: Path) -> None:
    # It said "no otel-replay store at s3://...", as of a bucket that holds no store.
    url, options = s3_bucket
    gone = url.replace("s3://t-", "s3://gone-", 1)
    bucket = gone.removeprefix("s3://").split("/", 1)[0]
    with pytest.raises(StoreNotFoundError) as caught:
        Store.open(gone, create=False, storage_options=options, cache_dir=tmp_path / "a")
    assert str(caught.value).endswith(
        f"no otel-replay store at {gone}: the bucket {bucket!r} does not exist"
    )
    with pytest.raises(StoreNotFoundError) as caught:
        Store.open(url, create=False, storage_options=options, cache_dir=tmp_path / "b")
    assert str(caught.value).endswith(f"no otel-replay store at {url}")  # the bucket is there


@pytest.mark.parametrize("url", ["s3://", "s3:///", "gs://"])
def test_a_url_with_no_bucket_is_refused_naming_it(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fsspec read "s3:" as a local path: "the bucket 'tmp' does not exist" (the directory the
    # command ran in), and a recording tried to write "s3:/FORMAT".
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError) as caught:
        Store.open(url, cache_dir=tmp_path / "cache")
    assert str(caught.value) == f"cannot open store {url}: the URL names no bucket or path"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("gcs_before", [1, 2])
def test_gc_keeps_what_a_machine_recording_relies_on(
    s3_bucket: Bucket, tmp_path: Path, gcs_before: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Machine B opened the store when an expired run's bodies were still there; machine C's
    gc then removes that run (no grace period), and B records a run that sends the same
    bodies. B's index says they are stored: it must not rely on that. With one gc before
    B's flush the pack is condemned, not yet deleted; with two it is gone.
    """
    monkeypatch.setenv("OTEL_REPLAY_GC_GRACE_S", "0")
    old = (int(time.time()) - 40 * 86_400) * 10**9
    sent = chat_bodies(3, seed=11)
    with open_machine(s3_bucket, tmp_path / "a") as store:
        for index, (request, response) in enumerate(sent):
            store.put([make_step("old", index, request, response, start_ns=old)])
        store.flush()
    writer = open_machine(s3_bucket, tmp_path / "b")
    with open_machine(s3_bucket, tmp_path / "c") as store:
        store.retention = Retention(ok_days=1, error_days=1)
        assert store.gc().runs_removed == ("old",)
        for _ in range(1, gcs_before):
            store.gc()
    for index, (request, response) in enumerate(sent):
        writer.put([make_step("new", index, request, response, start_ns=time.time_ns())])
        writer.flush()
    writer.close()
    with open_machine(s3_bucket, tmp_path / "c") as store:
        for _ in range(gcs_before, 3):
            store.gc()
    url, options = s3_bucket
    fs, root = fsspec.core.url_to_fs(url, **options)
    # The expired run's pack went, one gc after it was condemned; the new run's stays.
    assert len(fs.find(f"{root}/objects")) == 1
    assert json.loads(fs.cat_file(f"{root}/condemned"))["packs"] == {}
    assert fs.find(f"{root}/locks") == []  # every gc gave its lease up
    with open_machine(s3_bucket, tmp_path / "d") as store:
        assert_holds_only(store, "new", sent)


def test_a_record_written_after_another_machine_listed_is_read(
    s3_bucket: Bucket, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Machine A lists a run's directory (its s3fs client caches the listing); machine B
    then writes the run's next record there. A's refresh reads it. (Before, s3fs answered
    A's read from its cached listing: 'not found', and the step was left out.)"""
    url, options = s3_bucket
    pairs = chat_bodies(2, seed=13)
    writer = open_machine(s3_bucket, tmp_path / "b")
    writer.put([make_step("r", 0, *pairs[0])])
    writer.flush()
    # A client of its own, as on another machine: B's writes do not touch its caches.
    reader = Store.open(
        url, storage_options={**options, "skip_instance_cache": True}, cache_dir=tmp_path / "a"
    )
    try:
        assert reader.run("r").step_count == 1
        writer.put([make_step("r", 1, *pairs[1])])
        writer.flush()
        reader.refresh()
        assert [reader.request_body(s) for s in reader.steps("r")] == [q for q, _ in pairs]
        assert "otel-replay" not in caplog.text
    finally:
        reader.close()
        writer.close()


def test_a_merge_seen_half_done_by_another_machine_keeps_every_step(
    s3_bucket: Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Machine B refreshes while machine A merges a run's record files: the merged file is
    published, the ones it merged not deleted yet. B indexes all three; once they are gone,
    B's next refresh still lists every step of the run (from the merged file). (Before, the
    steps B had indexed from a file since deleted were forgotten with it.)"""
    url, options = s3_bucket
    pairs = chat_bodies(3, seed=17)
    writer = open_machine(s3_bucket, tmp_path / "a")
    for index, (request, response) in enumerate(pairs):
        writer.put([make_step("m", index, request, response)])
        writer.flush()
    reader = Store.open(
        url, storage_options={**options, "skip_instance_cache": True}, cache_dir=tmp_path / "b"
    )
    fs: Any = writer._backend.fs  # type: ignore[attr-defined]
    remove, refreshed = fs.rm_file, []

    def rm_file(path: str, **kwargs: Any) -> Any:
        if path.endswith(".rec") and not refreshed:  # the merged file is published
            refreshed.append(reader.refresh())
        return remove(path, **kwargs)

    monkeypatch.setattr(fs, "rm_file", rm_file)
    try:
        writer.compact()
        assert refreshed
        reader.refresh()
        assert [reader.request_body(s) for s in reader.steps("m")] == [q for q, _ in pairs]
        assert [p for p in reader.verify() if p.damage] == []
    finally:
        monkeypatch.undo()
        reader.close()
        writer.close()


def test_an_index_cache_that_cannot_be_written_names_the_setting(
    s3_bucket: Bucket, tmp_path: Path
) -> None:
    """A read-only home (the default cache is ~/.cache/otel-replay) is the usual cause in a
    container: the error says which setting moves it, not only the errno."""
    url, options = s3_bucket
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.raises(StoreNotWritableError) as info:
        Store.open(url, storage_options=options, cache_dir=blocked / "cache")
    message = str(info.value)
    assert message.startswith(f"cannot write the index cache {blocked / 'cache'}")
    assert url in message and message.endswith("set OTEL_REPLAY_CACHE_DIR to a writable directory")
