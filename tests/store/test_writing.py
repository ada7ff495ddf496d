"""The write path's parts: dedup by probe, span strings matched to bodies, packing on another
thread, publishing many files at once, and when a stream closed early is compacted."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from otel_replay.errors import StoreError
from otel_replay.store import Store, _stream
from otel_replay.store._fs import LocalBackend
from otel_replay.store._pack import KIND_RAW, KIND_RECIPE, KIND_SEGMENT, encode_pack
from otel_replay.store._stream import FLUSH_LEVEL, SMALL_RAW, Packer, SealedPack, StreamWriter
from tests.store._data import chat_bodies


def _kinds(writer: StreamWriter) -> list[int]:
    return [kind for kind, _ in writer._pending]


def test_a_request_stores_only_its_new_messages() -> None:
    writer = StreamWriter("r", 1)
    (first, _), (second, _) = chat_bodies(2)
    writer.put(first)
    before = len(writer._pending)
    writer.put(second)
    added = writer._pending[before:]
    # the previous answer and the new user message; the system prompt and tools are known
    assert [kind for kind, _ in added] == [KIND_SEGMENT, KIND_SEGMENT, KIND_RECIPE]
    assert sum(len(data) for _, data in added) < len(second) / 2


def test_span_strings_equal_to_a_body_of_the_flush_are_matched_without_hashing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    writer = StreamWriter("r", 1)
    request, response = chat_bodies(3)[-1]
    request_oid = writer.put(request, hashlib.sha256(request).digest())
    writer.put(response, hashlib.sha256(response).digest())
    hashed = []
    real = hashlib.sha256
    monkeypatch.setattr(_stream.hashlib, "sha256", lambda data: hashed.append(data) or real(data))
    assert writer.put_string(bytes(request)) == request_oid and not hashed  # equal bytes
    other = request.replace(b"gpt-test", b"gpt-best")
    other_oid = writer.put_string(other)
    assert hashed == [other] and writer.lookup(real(other).digest()) == other_oid


def test_span_strings_of_a_burst_are_stored_whole_without_hashing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    writer = StreamWriter("r", 1)
    hashed: list[bytes] = []
    real = hashlib.sha256
    monkeypatch.setattr(_stream.hashlib, "sha256", lambda data: hashed.append(data) or real(data))
    history = json.dumps([{"role": "user", "content": "x" * 900}] * 3).encode()
    first = writer.put_string(history, segment=False)
    assert writer.put_string(bytes(history), segment=False) == first  # repeated in the flush
    assert not hashed and writer._pending == [(KIND_RAW, history)]


def test_a_flush_that_is_never_published_leaves_nothing_to_probe() -> None:
    writer = StreamWriter("r", 1)
    (first, _), (second, _) = chat_bodies(2)
    writer.put(first)
    writer.rollback()
    assert not writer._recent and not writer._heads and writer.next_oid == 0
    writer.put(second)  # found nothing known: stored in full again
    assert KIND_SEGMENT in _kinds(writer)


def test_streams_closed_early_are_compacted_only_when_their_packs_are_many_and_small() -> None:
    writer = StreamWriter("r", 1)
    for raw in (1000, 1000, 1000):
        writer.published(SealedPack("p", writer.next_oid, writer.next_oid, b"", raw))
    assert not writer.worth_compacting  # three packs: not yet
    writer.published(SealedPack("p", 0, 0, b"", 1000))
    assert writer.worth_compacting
    burst = StreamWriter("b", 2)
    for _ in range(6):
        burst.published(SealedPack("p", 0, 0, b"", 4 * SMALL_RAW))
    assert not burst.worth_compacting  # large packs of a burst compress well alone


def test_the_packer_builds_the_packs_encode_pack_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_stream, "GROUP_RAW", 10_000)  # several groups, on the helper thread
    jobs = []
    for n, (request, response) in enumerate(chat_bodies(12)):
        entries = [(0, request), (0, response), (2, b'{"v":1}' * n)]
        jobs.append((f"packs/r/s/{n}", 3 * n, 3 * n + 2, entries))
    packer = Packer()
    for job in jobs:
        packer.add(job)
    packs = packer.finish()
    assert [pack.rel for pack in packs] == [job[0] for job in jobs]
    for pack, (_, first, _, entries) in zip(packs, jobs, strict=True):
        assert pack.data == encode_pack(first, entries, FLUSH_LEVEL)


def test_publishing_many_files_at_once(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    items = [(f"packs/run-{n}/s/{n:08x}.pack", os.urandom(3000)) for n in range(12)]
    backend.publish_many(items)
    backend.sync()
    assert {rel: (tmp_path / rel).read_bytes() for rel, _ in items} == dict(items)
    assert not list(tmp_path.rglob(".tmp-*"))


def test_a_failed_publish_leaves_no_temporary_file(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    (tmp_path / "packs").mkdir()
    (tmp_path / "packs" / "blocked").write_bytes(b"a file where a directory must go")
    items = [("packs/ok/a.pack", b"a"), ("packs/blocked/s/b.pack", b"b"), ("packs/ok/c.pack", b"c")]
    with pytest.raises(StoreError, match="blocked"):
        backend.publish_many(items)
    assert not list(tmp_path.rglob(".tmp-*"))
    assert not (tmp_path / "packs" / "ok" / "c.pack").exists()  # nothing renamed after a failure


def test_a_flush_while_the_interpreter_exits_writes_everything(tmp_path: Path) -> None:
    # A tracer provider flushes the exporter from an atexit handler, after the interpreter
    # has stopped its thread pools: the flush must do the work itself, not fail and retry.
    script = (
        "import atexit, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "from otel_replay.store import Store\n"
        "from tests.store._data import chat_bodies, fixture\n"
        f"store = Store.open({str(tmp_path / 'store')!r})\n"
        "def flush():\n"
        "    pairs = chat_bodies(12)\n"
        "    for run in range(6):\n"
        "        store.put([fixture(f'r_{run}', i, q, a) for i, (q, a) in enumerate(pairs)])\n"
        "    store.flush()\n"
        "    store.close()\n"
        "atexit.register(flush)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    with Store.open(tmp_path / "store", create=False) as store:
        assert [run.run_id for run in sorted(store.runs(), key=lambda r: r.run_id)] == [
            f"r_{run}" for run in range(6)
        ]
        assert store.verify() == []
        request, response = chat_bodies(12)[11]
        assert store.request_body(("r_5", 11)) == request
        assert store.response_body(("r_5", 11)) == response
