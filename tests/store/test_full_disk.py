"""A store on a device that fills up (a real tmpfs, ``_disk``): the failure names a full
device, a flush writes what fits, and nothing buffered is lost."""

from __future__ import annotations

import os
import random
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from otel_replay.errors import StoreFullError
from otel_replay.store import Store
from otel_replay.store._index import Index
from tests.store import _disk
from tests.store._data import make_step

pytestmark = pytest.mark.subprocess

small_disk = _disk.small_disk

BODY = 100_000
"""Bytes of each step's response: random, so they do not compress."""


def _put(store: Store, run_id: str, indexes: range, rng: random.Random) -> None:
    for n in indexes:
        store.put([make_step(run_id, n, b'{"q":%d}' % n, rng.randbytes(BODY))])


def test_a_flush_onto_a_full_device_writes_what_fits(small_disk: _disk.Disk) -> None:
    rng = random.Random(5)
    where = small_disk.root / "store"
    with Store.open(where) as store:
        _put(store, "r", range(10), rng)
        store.flush()
        small_disk.fill()
        _put(store, "r", range(10, 60), rng)  # 5 MB: more than will be freed
        with pytest.raises(StoreFullError) as full:
            store.flush()
        assert str(full.value).startswith(
            f"no space left on the device holding the store at {where}"
        )
        assert store.buffered().steps == {"r": 50}
        small_disk.release(2 << 20)
        with pytest.raises(StoreFullError):
            store.flush()
        # What fits was written, earliest steps first; the rest is still buffered.
        written = [s.index for s in store.steps("r")]
        assert 10 + 10 < len(written) < 60
        assert written == list(range(len(written)))
        assert store.buffered().steps == {"r": 60 - len(written)}
        small_disk.release()
        store.flush()
        assert store.buffered().steps == {}
        assert [s.index for s in store.steps("r")] == list(range(60))
    with Store.open(where, create=False) as store:
        assert store.verify() == []
        assert len(store.response_body(store.step("r", 59))) == BODY


def test_sqlite_out_of_space_is_a_full_device_not_a_corrupt_index(
    small_disk: _disk.Disk,
) -> None:
    path = small_disk.root / "index.sqlite"
    index = Index(path, holder=f"the store at {small_disk.root}")
    small_disk.fill()
    with pytest.raises(StoreFullError) as full, index.transaction() as tx:
        tx.execute("CREATE TABLE filler (data BLOB)")
        for _ in range(64):
            tx.execute("INSERT INTO filler VALUES (?)", (os.urandom(64 << 10),))
    message = str(full.value)
    assert message.startswith(f"no space left on the device holding the store at {small_disk.root}")
    assert str(path) in message and "rebuild" not in message
    small_disk.release()
    with index.transaction() as tx:  # usable again once there is room
        tx.execute("CREATE TABLE after (x)")
    index.close()
    with closing(sqlite3.connect(Path(path))) as index:
        assert index.execute("PRAGMA integrity_check").fetchone() == ("ok",)
