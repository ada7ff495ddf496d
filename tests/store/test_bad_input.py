"""Damaged or foreign stores: each gets a clear error naming the thing; nothing is rewritten."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

import pytest

from otel_replay.errors import (
    CorruptBlobError,
    CorruptIndexError,
    StoreError,
    StoreFormatError,
    StoreNotFoundError,
    StoreNotWritableError,
)
from otel_replay.store import Store
from otel_replay.store._format import FORMAT_VERSION
from otel_replay.store._index import SCHEMA_VERSION
from otel_replay.store._objects import manifest_refs
from tests.store._data import chat_bodies, make_step, tag


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _recorded(root: Path, turns: int = 6, run_id: str = "run-x") -> list[tuple[bytes, bytes]]:
    pairs = chat_bodies(turns)
    with Store.open(root) as store:
        for index, (request, response) in enumerate(pairs):
            store.put([make_step(run_id, index, request, response)])
            store.flush()
    return pairs


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_corrupt_blob_is_named_by_verify_and_by_the_read(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _recorded(root)
    (pack,) = root.rglob("*.pack")
    _flip(pack, 40)
    with Store.open(root) as store:
        problems = store.verify()
        assert problems
        assert any(p.kind == "pack" and p.path and pack.name in p.path for p in problems)
        damaged = [p for p in problems if p.kind == "body"]
        assert damaged and all(p.blob and p.blob.startswith("sha256:") for p in damaged)
        assert {p.run_id for p in damaged} == {"run-x"}
        step = store.step("run-x", damaged[0].step_index or 0)
        read = store.request_body if damaged[0].blob == step.request_hash else store.response_body
        with pytest.raises(CorruptBlobError, match=r"sha256:[0-9a-f]{64}") as info:
            read(step)
        assert pack.name in str(info.value) and "\n" not in str(info.value)


def test_a_reassembled_body_that_does_not_hash_is_refused(tmp_path: Path) -> None:
    """Valid pack, wrong bytes: the sha256 check on read still catches it."""
    root = tmp_path / "s"
    _recorded(root, turns=2)
    with Store.open(root) as store:
        digest = bytes.fromhex(store.step("run-x", 1).request_hash[7:])
        chunk = manifest_refs(store._reader.raw(digest)[1])[-1]
        # The chunk's place, one byte off.
        with closing(sqlite3.connect(root / "index.sqlite")) as index, index:
            index.execute(
                "UPDATE objects SET offset = offset + 1, size = size - 1 WHERE digest = ?",
                (chunk,),
            )
        with pytest.raises(CorruptBlobError, match=r"sha256:[0-9a-f]{64}.*does not match"):
            store.request_body("run-x", 1)
        assert "body" in {p.kind for p in store.verify()}


def test_a_truncated_index_is_named_and_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _recorded(root, turns=30)
    index = root / "index.sqlite"
    index.write_bytes(index.read_bytes()[: index.stat().st_size // 2])
    before = _snapshot(root)
    with pytest.raises(CorruptIndexError, match=str(index)) as info:
        Store.open(root)
    assert "rebuild" in str(info.value) and "\n" not in str(info.value)
    assert _snapshot(root) == before


def test_a_garbage_index_is_named(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _recorded(root, turns=1)
    (root / "index.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(CorruptIndexError, match=r"index\.sqlite"):
        Store.open(root)


def test_an_index_made_by_an_earlier_version_is_set_aside_and_rebuilt(tmp_path: Path) -> None:
    root = tmp_path / "s"
    pairs = _recorded(root)
    with Store.open(root) as store:
        store.pin("run-x")
        runs = store.runs()
    with closing(sqlite3.connect(root / "index.sqlite")) as index, index:
        index.execute("DROP TABLE steps")  # an older schema, as far as this version knows
        index.execute(f"PRAGMA user_version={SCHEMA_VERSION - 1}")
    with Store.open(root) as store:
        assert store.runs() == runs
        assert [store.request_body(s) for s in store.steps("run-x")] == [q for q, _ in pairs]
    assert len(list(root.glob("index.sqlite.broken-*[0-9]"))) == 1
    with closing(sqlite3.connect(root / "index.sqlite")) as index, index:
        assert index.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


def test_an_index_made_by_a_later_version_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _recorded(root, turns=1)
    with closing(sqlite3.connect(root / "index.sqlite")) as index, index:
        index.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    with pytest.raises(CorruptIndexError, match="schema version"):
        Store.open(root)


def test_rebuild_recreates_the_index_from_the_packs(tmp_path: Path) -> None:
    root = tmp_path / "s"
    pairs = _recorded(root)
    with Store.open(root) as store:
        store.pin("run-x")
        runs = store.runs()
    (root / "index.sqlite").write_bytes(b"\x00" * 4096)
    with Store.rebuild(root) as store:
        assert store.runs() == runs
        assert [store.request_body(s) for s in store.steps("run-x")] == [q for q, _ in pairs]
        assert store.verify() == []
    assert list(root.glob("index.sqlite.broken-*"))


def test_rebuild_keeps_a_run_whose_only_pack_is_damaged_and_gc_keeps_the_pack(
    tmp_path: Path,
) -> None:
    root = tmp_path / "s"
    _recorded(root, turns=3)
    (pack,) = root.rglob("*.pack")
    _flip(pack, 30)
    (root / "index.sqlite").unlink()
    with Store.rebuild(root) as store:
        # The records are intact: the run and its steps are all listed, bodies damaged.
        assert [s.index for s in store.steps("run-x")] == [0, 1, 2]
        problems = store.verify()
        assert problems[0].kind == "pack" and problems[0].path == str(pack.relative_to(root))
        assert {p.run_id for p in problems if p.kind == "body"} == {"run-x"}
        store.pin("run-x")
        report = store.gc(now=4_000_000_000.0)  # long after every grace period
        assert report.runs_removed == ()
    assert pack.exists()  # the damaged pack holds what a kept run references


def test_rebuild_keeps_every_step_whose_bodies_are_readable(tmp_path: Path) -> None:
    root, copy = tmp_path / "s", tmp_path / "copy"
    pairs = chat_bodies(4)
    with Store.open(root) as store:
        for index, (request, response) in enumerate(pairs):
            store.put([make_step("run-p", index, request, response)])
            store.flush()
        shutil.copytree(root, copy)  # before close merges the four packs into one
    packs = sorted(copy.rglob("*.pack"), key=lambda p: p.stat().st_mtime_ns)
    assert len(packs) == 4
    _flip(packs[2], 30)  # the pack of step 2's new objects
    (copy / "index.sqlite").unlink()
    with Store.rebuild(copy) as store:
        assert [s.index for s in store.steps("run-p")] == [0, 1, 2, 3]
        assert [store.request_body("run-p", n) for n in (0, 1)] == [q for q, _ in pairs[:2]]
        with pytest.raises(CorruptBlobError):
            store.response_body("run-p", 2)
        problems = store.verify()
        assert ("pack", str(packs[2].relative_to(copy))) in [(p.kind, p.path) for p in problems]


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (
            1,
            r"is format version 1, a pre-release layout; this otel-replay reads version 4 only\. "
            r"Record into a new store \(nothing was changed\)$",
        ),
        (
            2,
            r"is format version 2; this otel-replay reads version 4\. Convert it with "
            r"`otel-replay migrate` \(nothing was changed\)$",
        ),
        (
            3,
            r"is format version 3; this otel-replay reads version 4\. Convert it with "
            r"`otel-replay migrate` \(nothing was changed\)$",
        ),
        (
            5,
            r"is format version 5; this otel-replay reads version 4\. Upgrade otel-replay to "
            r"read it \(nothing was changed\)$",
        ),
        (99, r"is format version 99; this otel-replay reads version 4\. Upgrade"),
    ],
)
def test_another_format_version_is_refused_with_its_hint(
    tmp_path: Path, version: int, message: str
) -> None:
    assert FORMAT_VERSION == 4
    root = tmp_path / "s"
    _recorded(root, turns=1)
    (root / "FORMAT").write_text(json.dumps({"format": "otel-replay-store", "version": version}))
    before = _snapshot(root)
    for attempt in (Store.open, Store.rebuild):
        with pytest.raises(StoreFormatError, match=message) as info:
            attempt(root)
        assert str(info.value).startswith(f"{root / 'FORMAT'} is format version {version}")
        assert _snapshot(root) == before  # the index is not even set aside


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b'{"format": "something-else", "version": 1}', b'{"format": "otel-replay-store"}'],
)
def test_a_bad_format_file_is_refused(tmp_path: Path, content: bytes) -> None:
    root = tmp_path / "s"
    root.mkdir()
    (root / "FORMAT").write_bytes(content)
    with pytest.raises(StoreFormatError, match="FORMAT"):
        Store.open(root)
    assert (root / "FORMAT").read_bytes() == content


def test_a_directory_that_is_not_a_store_is_not_adopted(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("mine")
    with pytest.raises(StoreFormatError, match="not empty but has no FORMAT"):
        Store.open(root)
    assert sorted(os.listdir(root)) == ["notes.txt"]


def test_a_missing_store_is_not_created_when_asked_not_to(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError, match=str(tmp_path / "none")):
        Store.open(tmp_path / "none", create=False)
    assert not (tmp_path / "none").exists()


def test_an_unwritable_location_is_named(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        if not sys.platform.startswith("linux"):
            pytest.skip("needs a location even root cannot write")
        target = Path("/sys/fs/otel-replay-test-store")
    else:
        parent = tmp_path / "locked"
        parent.mkdir()
        parent.chmod(0o500)
        target = parent / "store"
    with pytest.raises(StoreNotWritableError, match=str(target)) as info:
        Store.open(target)
    assert isinstance(info.value, PermissionError) and "\n" not in str(info.value)


def test_a_closed_store_says_so(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s")
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.put([make_step("r", 0, b"q")])


def test_a_body_whose_hash_tag_is_malformed_is_refused(tmp_path: Path) -> None:
    bad = make_step("r", 0, b"q")
    bad.request_hash = tag(b"q").upper()
    with Store.open(tmp_path / "s") as store, pytest.raises(ValueError, match="'r' step 0"):
        store.put([bad])
